"""`ragaudit plan` and `ragaudit attest`: how many questions a decision between configurations needs,
and a release's attestation of its run. Registered on the `ragaudit` group by `ragaudit.cli`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ragaudit.cli_options import FORMAT


@click.command("plan")
@click.argument("gold_path", metavar="GOLD", type=click.Path(path_type=Path))
@click.option("--variants", type=click.IntRange(min=1), default=3, show_default=True, help="variants run per question")
@click.option("--seeds", type=click.IntRange(min=1), default=1, show_default=True, help="seeds run per variant")
@click.option("--effect", type=float, help="a target change in a rate, e.g. 0.03: how many questions it needs")
@click.option(
    "--discordance",
    type=float,
    default=0.10,
    show_default=True,
    help="assumed share of runs whose outcome differs between the two configurations",
)
@click.option(
    "--icc",
    type=float,
    default=0.5,
    show_default=True,
    help="assumed correlation of that difference between runs of one question (1: a question moves as a unit)",
)
@FORMAT
def plan(gold_path, variants, seeds, effect, discordance, icc, fmt):
    """How small a change in each rate (correct, citation match, coverage pass, grounded) a comparison
    of two configurations on GOLD can detect at 80% power and α = 0.05, paired, with exact sign tests
    as `compare` runs them; with --effect, how many questions that change needs.

    Exit 0; 2: a parameter out of range; 3: an unreadable gold set."""
    from ragaudit import power

    result = power.plan_gold(gold_path, variants=variants, seeds=seeds, effect=effect, discordance=discordance, icc=icc)
    click.echo(
        json.dumps(result, indent=1, sort_keys=True) if fmt == "json" else power.render_text(result), nl=fmt == "json"
    )


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--key",
    type=click.Path(path_type=Path, dir_okay=False),
    help="sign with this ed25519 private key (PEM; an encrypted one takes its passphrase from $RAGAUDIT_KEY_PASSWORD)",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="the attestation file (default: RUN_DIR/attestation.intoto.jsonl)",
)
def attest(run_dir, key, out):
    """Write a release attestation of RUN_DIR: an in-toto Statement v1 whose subject lists every file
    of the run with its sha256, and whose predicate holds the input hashes (gold set, corpus, config,
    traces, models, indexes), the gate's verdict, each check with its threshold and its source, the
    versions and the command of the run. With --key, a DSSE envelope signed with it. Check it with
    `ragaudit verify RUN_DIR --attestation FILE [--pubkey PUB.pem]`.

    Exit 0; 3: no run directory, a damaged manifest or report, an unreadable key; 5: the run
    changed since it ran (nothing is attested)."""
    from ragaudit import attest as attestation

    path, body = attestation.attest(run_dir, key=key, out=out)
    predicate = body["predicate"]
    click.echo(
        f"wrote {path}: {len(body['subject'])} files, gate {predicate['verdict']}, "
        f"{len(predicate['checks'])} checks{', signed' if key else ', not signed (no --key)'}"
    )
