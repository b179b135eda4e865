"""The Jinja2 environment of the HTML reports: templates from `templates/`, every value escaped
unless marked safe with `trusted`, and a name a template uses but the view model lacks is an error,
never an empty string. Built on first use, so importing a report module stays cheap."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from jinja2 import Environment
    from markupsafe import Markup


@cache
def environment() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    from ragaudit.outputs.render.formatting import FILTERS

    env = Environment(
        loader=PackageLoader("ragaudit.outputs.render", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    return env


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def stream(name: str, **context: Any) -> Iterator[str]:
    """The text `render` gives, in the pieces the template yields, none of them held after."""
    return environment().get_template(name).generate(**context)


def trusted(markup: str) -> Markup:
    """Markup this package built and escaped itself (chart SVG, the page's CSS and script): the
    templates insert it as it is."""
    from markupsafe import Markup

    return Markup(markup)


def asset(name: str) -> str:
    """A file of `templates/` as text (the page's CSS and script)."""
    return resources.files("ragaudit.outputs.render").joinpath("templates", name).read_text(encoding="utf-8")
