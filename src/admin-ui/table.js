// Sortable tables. sortRows is pure (t/ui/table.test.mjs); renderTable
// builds the element. Each table remembers how it was sorted across
// refreshes (by its id), so a refresh never reorders what the reader chose.

// Rows sorted by column `key` (value(row) gives what is compared), ascending
// or descending; numbers as numbers, text by locale, empty values (null,
// undefined, "") always last; equal rows keep their order.
export function sortRows(rows, value, dir = 'asc') {
  const sign = dir === 'desc' ? -1 : 1;
  return rows
    .map((row, i) => ({ row, i, v: value(row) }))
    .sort((a, b) => {
      const ae = a.v === null || a.v === undefined || a.v === '';
      const be = b.v === null || b.v === undefined || b.v === '';
      if (ae || be) return ae === be ? a.i - b.i : ae ? 1 : -1;
      let c;
      if (typeof a.v === 'number' && typeof b.v === 'number') c = a.v - b.v;
      else c = String(a.v).localeCompare(String(b.v), 'en', { numeric: true });
      return c !== 0 ? sign * c : a.i - b.i;
    })
    .map((x) => x.row);
}

const sortState = new Map();   // table id -> { key, dir }

// columns: [{ key, label, value(row) (sorting), cell(row, doc) -> Node|string, num (right-aligned) }]
// opts: { id, rows, empty (the sentence shown without rows), foot (rows not sorted, e.g. the total), caption }
export function renderTable(doc, columns, { id, rows, empty, foot = [], caption } = {}) {
  const wrap = doc.createElement('div');
  wrap.className = 'scroll';
  if (!rows.length && !foot.length) {
    const p = doc.createElement('p');
    p.className = 'empty';
    p.textContent = empty || 'nothing to show';
    wrap.append(p);
    return wrap;
  }
  const state = sortState.get(id);
  const col = state && columns.find((c) => c.key === state.key);
  const sorted = col ? sortRows(rows, col.value, state.dir) : rows;

  const table = doc.createElement('table');
  table.dataset.table = id;
  if (caption) {
    const c = doc.createElement('caption');
    c.textContent = caption;
    table.append(c);
  }
  const thead = doc.createElement('thead');
  const hr = doc.createElement('tr');
  for (const c of columns) {
    const th = doc.createElement('th');
    th.scope = 'col';
    if (c.num) th.className = 'num';
    const active = col === c;
    th.setAttribute('aria-sort', active ? (state.dir === 'asc' ? 'ascending' : 'descending') : 'none');
    const b = doc.createElement('button');
    b.type = 'button';
    b.className = 'sort';
    b.dataset.key = c.key;
    b.textContent = c.label + (active ? (state.dir === 'asc' ? ' ▲' : ' ▼') : '');
    b.addEventListener('click', () => {
      const cur = sortState.get(id);
      // Numbers first sort largest first; text A to Z; a second click turns it round.
      const first = c.num ? 'desc' : 'asc';
      const dir = cur && cur.key === c.key ? (cur.dir === 'asc' ? 'desc' : 'asc') : first;
      sortState.set(id, { key: c.key, dir });
      wrap.replaceWith(renderTable(doc, columns, { id, rows, empty, foot, caption }));
    });
    th.append(b);
    hr.append(th);
  }
  thead.append(hr);
  table.append(thead);
  const body = (list, parent) => {
    for (const row of list) {
      const tr = doc.createElement('tr');
      for (const c of columns) {
        const td = doc.createElement('td');
        if (c.num) td.className = 'num';
        td.dataset.col = c.key;
        const v = c.cell(row, doc);
        if (v instanceof Object && 'nodeType' in v) td.append(v);
        else td.textContent = v === undefined || v === null ? '' : String(v);
        tr.append(td);
      }
      parent.append(tr);
    }
  };
  const tbody = doc.createElement('tbody');
  body(sorted, tbody);
  table.append(tbody);
  if (foot.length) {
    const tfoot = doc.createElement('tfoot');
    body(foot, tfoot);
    table.append(tfoot);
  }
  wrap.append(table);
  return wrap;
}
