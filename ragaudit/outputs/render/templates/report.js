(function () {
  'use strict';
  // Every piece of report text reaches the page through text nodes (append/textContent), never
  // through innerHTML, so trace text cannot become markup.
  var DATA = JSON.parse(document.getElementById('data').textContent);
  var table = document.getElementById('qtable');
  if (!table) return;
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var filter = document.getElementById('qfilter');
  var pipeSel = document.getElementById('qpipeline');
  var lamSel = document.getElementById('qlambda');
  var count = document.getElementById('qcount');
  var drill = document.getElementById('drill');

  function el(tag, cls, children) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    });
    return node;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toFixed(digits === undefined ? 3 : digits);
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    return String(v);
  }
  function chip(kind, text) { return el('span', 'chip ' + kind, [text]); }
  function fact(label, value) { return el('span', null, [label + ' ', el('b', null, [fmt(value)])]); }
  // Offsets count Unicode code points (Python str indexes); JS strings count UTF-16 units.
  function cps(s) { return Array.from(s || ''); }

  // ---- filter and sort -------------------------------------------------------------------------
  function applyFilter() {
    var words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    var p = pipeSel.value, l = lamSel.value, shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute('data-s');
      var ok = (!p || row.getAttribute('data-p') === p) && (!l || row.getAttribute('data-l') === l) &&
        words.every(function (w) { return text.indexOf(w) !== -1; });
      row.hidden = !ok;
      if (ok) shown += 1;
    });
    count.textContent = shown + ' of ' + rows.length;
  }
  filter.addEventListener('input', applyFilter);
  pipeSel.addEventListener('change', applyFilter);
  lamSel.addEventListener('change', applyFilter);

  function cellKey(row, col, numeric) {
    var cell = row.cells[col];
    if (!numeric) return cell.textContent.trim().toLowerCase();
    var raw = cell.getAttribute('data-v');
    return raw === null || raw === '' ? null : parseFloat(raw);
  }
  Array.prototype.forEach.call(table.tHead.querySelectorAll('button'), function (button) {
    button.addEventListener('click', function () {
      var th = button.parentNode;
      var col = parseInt(button.getAttribute('data-col'), 10);
      var numeric = button.getAttribute('data-type') === 'num';
      var dir = th.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending';
      Array.prototype.forEach.call(table.tHead.querySelectorAll('th'), function (h) { h.setAttribute('aria-sort', 'none'); });
      th.setAttribute('aria-sort', dir);
      var sign = dir === 'ascending' ? 1 : -1;
      var keyed = rows.map(function (row, i) { return { row: row, key: cellKey(row, col, numeric), i: i }; });
      keyed.sort(function (a, b) {
        if (a.key === null || b.key === null) {
          if (a.key === b.key) return a.i - b.i;
          return a.key === null ? 1 : -1;  // missing values last in either direction
        }
        if (a.key < b.key) return -sign;
        if (a.key > b.key) return sign;
        return a.i - b.i;
      });
      rows = keyed.map(function (k) { return k.row; });
      var frag = document.createDocumentFragment();
      rows.forEach(function (row) { frag.appendChild(row); });
      tbody.appendChild(frag);
    });
  });

  tbody.addEventListener('click', function (event) {
    var row = event.target.closest('tr');
    if (row) open(parseInt(row.getAttribute('data-i'), 10), true);
  });
  tbody.addEventListener('keydown', function (event) {
    var row = event.target.closest('tr');
    if (row && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      open(parseInt(row.getAttribute('data-i'), 10), true);
    }
  });
  // A failing-question link in the gate table narrows the table to that question and opens it.
  document.addEventListener('click', function (event) {
    var link = event.target.closest('.qlink');
    if (!link) return;
    var p = link.getAttribute('data-p'), q = link.getAttribute('data-q');
    pipeSel.value = p;
    filter.value = q;
    lamSel.value = '';
    applyFilter();
    var i = DATA.questions.findIndex(function (x) { return x.pipeline === p && x.qid === q; });
    if (i >= 0) open(i, true);
  });

  // ---- drill-down ------------------------------------------------------------------------------
  // `text` shown inside a <mark> within its document context; the part of the context that the
  // gold anchor covers is underlined, so overlap with the gold span is visible in place.
  function pieces(parent, text, offset, gold) {
    var chars = cps(text);
    if (!gold || offset === null || offset === undefined) { parent.append(text); return; }
    var a = Math.max(0, Math.min(chars.length, gold.start - offset));
    var b = Math.max(0, Math.min(chars.length, gold.end - offset));
    if (a >= b) { parent.append(text); return; }
    parent.append(chars.slice(0, a).join(''), el('span', 'in-gold', [chars.slice(a, b).join('')]), chars.slice(b).join(''));
  }
  function inContext(text, context, offsets, markClass, gold) {
    var pre = el('pre', 'ctx');
    if (text === null || text === undefined) { pre.append(el('span', 'elide', ['(snippet text not available)'])); return pre; }
    var start = offsets && offsets.unit === 'char' ? offsets.start : null;
    var before = context ? context.before || '' : '', after = context ? context.after || '' : '';
    var base = start === null ? null : start - cps(before).length;
    if (context && base > 0) pre.append(el('span', 'elide', ['… ']));
    pieces(pre, before, base, gold);
    var mark = el('mark', markClass);
    pieces(mark, text, start, gold);
    pre.append(mark);
    pieces(pre, after, start === null ? null : start + cps(text).length, gold);
    // A document usually ends in a newline, so a context that does not is cut short.
    if (context && after && !/\n\s*$/.test(after)) pre.append(el('span', 'elide', [' …']));
    return pre;
  }
  function overlapsGold(snip, gold) {
    var a = gold && gold.anchor, o = snip && snip.offsets;
    return !!(a && o && snip.doc_id === gold.doc_id && o.unit === a.unit && o.start < a.end && a.start < o.end);
  }

  function spanCard(span, gold) {
    var snip = DATA.snippets[span.ref] || {};
    var hit = overlapsGold(snip, gold);
    var rank = span.k_final !== null && span.k_final !== undefined ? span.k_final : span.k_pos;
    var o = snip.offsets;
    var head = el('header', null, [
      el('span', 'rank', ['#' + fmt(rank)]),
      el('span', 'sid', [span.snippet_id || snip.snippet_id || '?']),
      el('span', 'muted', [(snip.doc_id || '?') + ' § ' + (snip.section_id || '?')]),
      o ? el('span', 'muted', [o.unit + ' ' + o.start + '–' + o.end]) : null,
      el('span', 'muted', ['score ' + fmt(span.score_norm) + (span.rerank_score !== null && span.rerank_score !== undefined
        ? ' · rerank ' + fmt(span.rerank_score) : '') + ' · k_pos ' + fmt(span.k_pos)]),
      span.cited ? chip('cited', 'cited') : chip('', 'not cited'),
      hit ? chip('gold', 'overlaps gold') : null
    ]);
    var goldSpan = hit && o.unit === 'char' ? gold.anchor : null;
    var card = el('article', 'span-card' + (span.cited ? ' cited' : ''), [head,
      inContext(snip.text, snip.context, o, span.cited ? 'hl-cited' : 'hl-retrieved', goldSpan)]);
    card.setAttribute('data-ref', span.ref);
    return card;
  }

  function goldCard(gold) {
    if (!gold) return el('p', 'muted', ['No gold item.']);
    var a = gold.anchor || {};
    var head = el('header', null, [chip('gold', 'gold'), el('span', 'sid', [gold.doc_id || '?']),
      el('span', 'muted', ['§ ' + (gold.section_id || '?')]), el('span', 'muted', [(a.unit || '') + ' ' + a.start + '–' + a.end])]);
    var card = el('article', 'span-card gold', [head, inContext(a.text, gold.context, a, 'hl-gold', null)]);
    var extra = [];
    if (gold.reference_answer) extra.push(el('p', 'small', [el('b', null, ['Reference answer: ']), gold.reference_answer]));
    if (gold.decoy) extra.push(el('p', 'small muted', ['Decoy: ' + gold.decoy.doc_id + ' § ' + gold.decoy.section_id]));
    return el('div', null, [card].concat(extra));
  }

  // The answer claim by claim: what it cites, whether its cited texts support it, and how it
  // stands to the gold anchor (states / conflicts / other), with what it lacks or gives instead.
  function answerBlock(run) {
    var box = el('div', 'answer');
    if (run.error) box.append(el('div', 'error-box', ['Pipeline error: ' + run.error]));
    var grounding = {supported: 'pass', unsupported: 'fail', contradicted: 'fail', misattributed: 'fail', uncited: 'warn'};
    var anchor = {states: 'pass', conflicts: 'fail', other: 'other'};
    (run.claims || []).forEach(function (c) {
      var cites = el('span', 'cites', (c.citations || []).map(function (id) { return chip('cited id', id); }));
      var g = chip(grounding[c.grounding] || 'warn', c.grounding +
        (c.support === null || c.support === undefined ? '' : ' ' + fmt(c.support, 2)));
      var hall = c.hallucinated && c.hallucinated.length ? chip('fail', 'not in its sources: ' + c.hallucinated.join(', ')) : null;
      var a = c.anchor ? chip(anchor[c.anchor], (c.anchor === 'states' ? 'states the gold' : c.anchor === 'conflicts'
        ? 'conflicts with the gold' : 'another fact') + (c.key_share === null || c.key_share === undefined ? ''
        : ' · key ' + Math.round(100 * c.key_share) + '%')) : null;
      var detail = c.conflicts && c.conflicts.length ? el('span', 'muted small', [' gives ' + c.conflicts.join(', ')])
        : c.anchor && c.missing && c.missing.length ? el('span', 'muted small', [' lacks ' + c.missing.join(', ')]) : null;
      box.append(el('div', 'seg', [el('span', 'n', [fmt(c.n)]), el('span', 't', [c.text || '']), cites, g, hall, a, detail]));
    });
    if (!(run.claims || []).length && run.answer) box.append(el('div', 'seg', [el('span', 't', [run.answer])]));
    if (!(run.claims || []).length && !run.answer && !run.error) box.append(el('span', 'muted', ['Retrieval only: no answer.']));
    return box;
  }

  // Chain-of-thought runs: each step with the sources it cites, its ΔS and the chain's λ state,
  // then the sources aggregated over the chain (primary ones first).
  function chainBlock(run) {
    if (!run.steps || !run.steps.length) return null;
    var chain = run.chain || {};
    var att = run.attribution || {};
    var usage = att.usage_by_step || {};
    var rows = run.steps.map(function (step, i) {
      var state = i > 0 && chain.states ? chain.states[i - 1] : null;
      return el('tr', null, [el('td', 'num', [fmt(step.step_number)]), el('td', null, [step.question || '']),
        el('td', null, (step.citations || []).map(function (c) { return chip('cited id', c); })),
        el('td', null, [(usage[step.step_number] || []).join(', ')]),
        el('td', 'num', [chain.delta_s ? fmt(chain.delta_s[i]) : '–']),
        el('td', null, [state ? chip(state === 'convergent' ? 'pass' : state === 'recursive' ? 'warn' : 'fail', state) : '–'])]);
    });
    var table = el('table', 'runs', [el('thead', null, [el('tr', null, ['step', 'question', 'cites', 'documents', 'ΔS', 'λ']
      .map(function (h) { return el('th', null, [h]); }))]), el('tbody', null, rows)]);
    var primary = (att.primary_sources || []).map(function (s) { return s.doc_id + ' (' + fmt(s.relevance, 2) + ')'; });
    return el('div', 'chain', [el('h4', null, ['Reasoning chain' + (chain.state ? ' · λ ' + chain.state : '')]), table,
      el('p', 'small', [el('b', null, ['Primary sources: ']), primary.join(', ') || '–']),
      el('p', 'small muted', ['All sources: ' + (att.all_sources || []).map(function (s) {
        return s.doc_id + ' (' + fmt(s.relevance, 2) + ')'; }).join(', ')])]);
  }

  function runDetail(q, run) {
    var spans = run.spans || [];
    var m = run.metrics || {};
    var facts = el('p', 'facts', [fact('match', m.citation_match), fact('coverage', m.coverage),
      fact('ΔS(q, cited)', m.delta_s_qr), fact('ΔS(q, gold)', m.delta_s_gold), fact('ΔS excess', m.delta_s_excess),
      fact('ΔS(q, top-k)', m.delta_s_topk), fact('ΔS(cited, anchor)', m.delta_s_ra),
      fact('precision', m.citation_precision), fact(DATA.labels['hit@k'], m['hit@k']),
      fact(DATA.labels['recall@k'], m['recall@k']), fact('mrr', m.mrr), fact(DATA.labels['ndcg@k'], m['ndcg@k']),
      fact('support', m.support),
      fact('grounded', m.grounded), fact('anchor support', m.anchor_support), fact('key content', m.key_content)]);
    var verdict = el('p', 'why ' + (run.correct ? 'ok' : 'bad'), [
      run.correct ? chip('pass', 'correct') : chip('fail', 'not correct'), ' ', run.why || '']);
    var left = el('div', null, [el('h4', null, ['Retrieved spans (' + spans.length + ')'])].concat(
      spans.length ? spans.map(function (s) { return spanCard(s, q.gold); }) : [el('p', 'muted', ['Nothing retrieved.'])]));
    var right = el('div', 'gold-col', [el('h4', null, ['Gold span']), goldCard(q.gold)]);
    return el('div', 'run-detail', [
      el('h4', null, ['Answer · variant ' + fmt(run.variant) + ' · seed ' + fmt(run.seed)]),
      el('p', 'small', [el('b', null, ['Query: ']), run.query || '']), verdict, facts, answerBlock(run), chainBlock(run),
      el('div', 'evidence', [left, right])]);
  }

  function runsTable(q, onPick) {
    var head = el('thead', null, [el('tr', null, ['variant', 'seed', 'query', 'correct', 'why', 'match', 'coverage', 'ΔS',
      'zone', 'cited'].map(function (h, i) { return el('th', i > 4 && i !== 8 ? 'num' : null, [h]); }))]);
    var body = el('tbody');
    q.runs.forEach(function (run, i) {
      var m = run.metrics || {};
      var bad = function (ok) { return 'num' + (ok ? '' : ' bad'); };
      var tr = el('tr', null, [el('td', 'num', [fmt(run.variant)]), el('td', 'num', [fmt(run.seed)]),
        el('td', 'query', [run.query || '']),
        el('td', null, [run.correct ? chip('pass', 'yes') : chip('fail', run.errored ? 'errored' : 'no')]),
        el('td', 'why', [run.why || '']),
        el('td', bad(m.citation_match === 1), [run.error ? chip('fail', 'error') : fmt(m.citation_match)]),
        el('td', bad(m.coverage == null || m.coverage >= DATA.thresholds.coverage_min), [fmt(m.coverage)]),
        el('td', 'num', [fmt(m.delta_s_qr)]),
        el('td', null, [run.zone ? el('span', 'zone z-' + run.zone, [run.zone]) : '–']),
        el('td', 'num', [String((run.spans || []).filter(function (s) { return s.cited; }).length)])]);
      tr.tabIndex = 0;
      tr.addEventListener('click', function () { onPick(i); });
      tr.addEventListener('keydown', function (e) { if (e.key === 'Enter') onPick(i); });
      body.append(tr);
    });
    return el('table', 'runs', [head, body]);
  }

  function open(i, scroll) {
    var q = DATA.questions[i];
    if (!q) return;
    rows.forEach(function (row) { row.classList.toggle('selected', row.getAttribute('data-i') === String(i)); });
    var lam = q.lambda || {};
    var close = el('button', 'drill-close', ['Close']);
    close.type = 'button';
    close.addEventListener('click', function () { drill.hidden = true; drill.replaceChildren(); });
    var head = el('div', 'drill-head', [el('div', null, [
      el('h3', null, [el('span', 'qid', [q.qid]), ' · ', el('span', 'muted', [q.pipeline])]),
      el('p', 'question', [q.question || '']),
      el('p', 'facts', [el('span', 'lam s-' + (lam.state || ''), [(lam.symbol || '') + ' ' + (lam.state || '')]),
        fact('css', lam.css), fact('spread', lam.spread), fact('runs', q.runs.length),
        el('span', null, ['section ', el('b', 'mono', [q.section_id || '–'])])])]), close]);
    var detail = el('div');
    var runs = runsTable(q, pick);
    function pick(r) {
      Array.prototype.forEach.call(runs.tBodies[0].rows, function (row, k) { row.classList.toggle('selected', k === r); });
      detail.replaceChildren(runDetail(q, q.runs[r]));
    }
    var title = 'Runs (' + q.runs.length + (q.more ? ' shown, failing first; ' + q.more + ' more in runs.parquet' : '') + ')';
    drill.replaceChildren(head, el('h4', null, [title]), runs, detail);
    drill.setAttribute('data-i', String(i));
    drill.hidden = false;
    // Open on the first run that went wrong, since that is usually why the question was opened.
    var first = q.runs.findIndex(function (r) { return !r.correct; });
    if (q.runs.length) pick(first < 0 ? 0 : first);
    if (scroll) drill.scrollIntoView({ block: 'start' });
  }

  applyFilter();
})();
