// Operator panel: start runs, follow them live, browse the run history.
import * as THREE from 'three';
import { OrbitControls } from 'three/addons/controls/OrbitControls.js';
import { buildRobot, parseUrdf } from './robot.js';

const $ = (sel, root = document) => root.querySelector(sel);
const ACTIVE = new Set(['starting', 'running']);
const LOG_MAX = 400;

// ---------------------------------------------------------------- helpers

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k === 'dataset') Object.assign(e.dataset, v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c != null) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

const fmt = (v, digits = 1) =>
  v == null || v === '' ? '–' : typeof v === 'number' ? v.toFixed(digits) : String(v);

function showError(msg) {
  const box = $('#error');
  box.textContent = msg;
  box.hidden = false;
}

function clearError() {
  const box = $('#error');
  box.textContent = '';
  box.hidden = true;
}

// FastAPI errors: {"detail": "text"} or {"detail": [{"loc": [...], "msg": "..."}]}.
function detailText(detail) {
  if (detail == null) return null;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => {
      if (typeof d !== 'object' || d === null) return String(d);
      const loc = Array.isArray(d.loc) ? d.loc.filter((p) => p !== 'body').join('.') : '';
      return loc ? `${loc}: ${d.msg ?? JSON.stringify(d)}` : (d.msg ?? JSON.stringify(d));
    }).join('; ');
  }
  return JSON.stringify(detail);
}

// Every HTTP call goes through here; failures land in #error, success clears it.
async function api(path, { method = 'GET', body } = {}) {
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    const msg = `${method} ${path}: server not reachable (${err.message})`;
    showError(msg);
    throw new Error(msg);
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    const msg = detailText(data?.detail) || `${method} ${path}: HTTP ${res.status} ${res.statusText}`;
    showError(msg);
    throw new Error(msg);
  }
  clearError();
  return data;
}

// ---------------------------------------------------------------- start form

const state = { options: null, level: null, run: null, formFromRun: false, cameraSeq: 0 };

function fillSelect(sel, values, chosen) {
  sel.replaceChildren(...values.map((v) => {
    const o = typeof v === 'object' ? v : { label: v, value: v };
    return el('option', { value: String(o.value), text: o.label });
  }));
  if (chosen != null) sel.value = String(chosen);
}

function renderLevels(opts) {
  const box = $('#levels');
  box.replaceChildren();
  const levels = opts.levels || [];
  const sources = [...(opts.sources || [])];
  for (const l of levels) if (!sources.includes(l.source)) sources.push(l.source);
  for (const src of sources) {
    const mine = levels.filter((l) => l.source === src);
    if (!mine.length) continue;
    box.append(el('div', { class: 'level-group', dataset: { source: src } },
      el('h3', { text: src }),
      el('div', { class: 'level-cards' }, mine.map((l) =>
        el('button', {
          type: 'button', class: 'level-card', dataset: { level: l.id }, title: l.name,
          onclick: () => selectLevel(l.id),
        },
        el('span', { class: 'lvl-id', text: l.id }),
        el('span', { class: 'lvl-name', text: l.name }),
        el('span', { class: 'lvl-n', text: `${l.n} cartons` }))))));
  }
}

function selectLevel(id) {
  state.level = Number(id);
  for (const b of document.querySelectorAll('.level-card')) {
    b.classList.toggle('selected', Number(b.dataset.level) === state.level);
  }
}

async function loadOptions() {
  const o = await api('/api/options');
  state.options = o;
  renderLevels(o);
  fillSelect($('#opt-planner'), o.planners || [], o.default_planner);
  fillSelect($('#opt-perception'), o.perception || [], o.default_perception);
  fillSelect($('#opt-telemetry'), o.telemetry || [], o.default_telemetry);
  const presets = o.speed_presets || [];
  const speed0 = presets.find((p) => Number(p.value) === 0) ?? presets[0];
  fillSelect($('#opt-speed'), presets, speed0?.value);
  if (o.seed_max != null) $('#opt-seed').max = o.seed_max;
  if (o.episodes_max != null) $('#opt-episodes').max = o.episodes_max;
  if (o.levels?.length) selectLevel(o.levels[0].id);
  if (state.run) applyRunToForm(state.run);
  updateBadge();
}

// Once per page load: show the options of the current/last run in the form.
function applyRunToForm(run) {
  const opt = run?.options;
  if (state.formFromRun || !state.options || !opt || run.state === 'idle') return;
  state.formFromRun = true;
  const setSel = (id, v) => {
    const s = $(id);
    if (v != null && [...s.options].some((o) => o.value === String(v))) s.value = String(v);
  };
  setSel('#opt-planner', opt.planner);
  setSel('#opt-perception', opt.perception);
  setSel('#opt-telemetry', opt.telemetry);
  setSel('#opt-speed', opt.speed);
  if (opt.seed != null) $('#opt-seed').value = opt.seed;
  $('#opt-stability').checked = Boolean(opt.stability);
  if (opt.episodes != null) $('#opt-episodes').value = opt.episodes;
  if (opt.level != null && document.querySelector(`.level-card[data-level="${opt.level}"]`)) {
    selectLevel(opt.level);
  }
}

function updateBadge() {
  const run = state.run;
  const telemetry = run && ACTIVE.has(run.state) && run.options?.telemetry
    ? run.options.telemetry : $('#opt-telemetry').value;
  const debug = telemetry === 'off';
  const badge = $('#mode-badge');
  badge.textContent = debug ? 'DEBUG · NO TELEMETRY' : 'RUN';
  badge.classList.toggle('debug', debug);
}

// ---------------------------------------------------------------- pallet spec editor
// A form built from the spec's JSON Schema (GET /api/spec): a field per number, a checkbox per
// rule with the rule's own fields, checked by the server on every change (POST /api/spec/check).
// Keys the form never shows: the format version and this_side_up (always true).
const SPEC_FIXED = new Set(['schema', 'this_side_up']);

function specRef(prop) {
  const ref = (prop.anyOf || []).find((a) => a.$ref)?.$ref;
  return ref ? ref.split('/').pop() : null;
}

function specNumber(prop) {
  return prop.type === 'number' ? prop : (prop.anyOf || []).find((a) => a.type === 'number');
}

function specInput(path, prop, value) {
  const num = specNumber(prop);
  if (prop.enum) {
    const s = el('select', { 'data-spec': path });
    for (const v of prop.enum) s.append(el('option', { value: v, text: v }));
    return s;
  }
  if (num) {
    const i = el('input', { type: 'number', step: 'any', 'data-spec': path, 'data-kind': 'number' });
    if (value != null) i.value = value;
    if (num.maximum != null) i.max = num.maximum;
    return i;
  }
  // A mapping of type -> kg, or a list of types: typed as text, `std_m=40, book_s=20` or
  // `pouch_xs, mini_s`.
  const kind = prop.type === 'object' ? 'map' : prop.type === 'array' ? 'list' : 'text';
  return el('input', { type: 'text', 'data-spec': path, 'data-kind': kind, placeholder: prop.description || '' });
}

function renderSpecForm(spec) {
  const form = $('#spec-form');
  form.replaceChildren();
  const { schema } = spec;
  for (const [key, prop] of Object.entries(schema.properties)) {
    if (SPEC_FIXED.has(key)) continue;
    const ref = specRef(prop);
    if (!ref) {
      form.append(el('label', { class: 'spec-field', title: prop.description || '' },
        el('span', { text: key }), specInput(key, prop, null)));
      continue;
    }
    const def = schema.$defs[ref];
    const on = el('input', { type: 'checkbox', 'data-rule': key });
    const fields = el('div', { class: 'spec-rule-fields' });
    for (const [sub, sp] of Object.entries(def.properties)) {
      fields.append(el('label', { title: sp.description || '' },
        el('span', { text: sub }), specInput(`${key}.${sub}`, sp, sp.default)));
    }
    form.append(el('fieldset', { class: 'spec-rule', title: def.description || '' },
      el('legend', {}, on, el('span', { text: ` ${key}` })), fields));
  }
  form.addEventListener('change', checkSpec);
}

// The spec the form says: rules ticked with their fields, numbers given; null when empty.
function specFromForm() {
  const doc = {};
  const parse = (inp) => {
    const v = inp.value.trim();
    if (inp.dataset.kind === 'number') return v === '' ? undefined : Number(v);
    if (inp.dataset.kind === 'list') return v ? v.split(',').map((t) => t.trim()).filter(Boolean) : [];
    if (inp.dataset.kind === 'map') {
      const out = {};
      for (const part of v.split(',').map((t) => t.trim()).filter(Boolean)) {
        const [k, kg] = part.split('=').map((t) => t.trim());
        out[k] = kg === undefined || kg === '' ? kg : Number(kg);
      }
      return out;
    }
    return v === '' ? undefined : v;
  };
  for (const inp of document.querySelectorAll('#spec-form [data-spec]')) {
    const [key, sub] = inp.dataset.spec.split('.');
    if (sub === undefined) {
      const v = parse(inp);
      if (v !== undefined) doc[key] = v;
      continue;
    }
    if (!document.querySelector(`#spec-form [data-rule="${key}"]`).checked) continue;
    doc[key] = doc[key] || {};
    const v = parse(inp);
    if (v !== undefined) doc[key][sub] = v;
  }
  return Object.keys(doc).length ? doc : null;
}

async function checkSpec() {
  const doc = specFromForm();
  state.spec = doc;
  const list = $('#spec-problems');
  list.replaceChildren();
  list.hidden = true;
  if (doc === null) {
    $('#spec-state').textContent = 'none';
    return true;
  }
  const res = await fetch('/api/spec/check', {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
    body: JSON.stringify(doc),
  });
  const body = await res.json();
  if (res.ok) {
    $('#spec-state').textContent = body.spec ? Object.keys(body.spec)
      .filter((k) => !SPEC_FIXED.has(k) && k !== 'name').join(', ') : 'none';
    return true;
  }
  for (const p of body.problems || []) {
    list.append(el('li', { text: `${p.key} = ${JSON.stringify(p.value)}; expected ${p.expected}` }));
  }
  if (!body.problems) list.append(el('li', { text: detailText(body.detail) }));
  list.hidden = false;
  $('#spec-state').textContent = 'invalid';
  return false;
}

async function loadSpecEditor() {
  try {
    renderSpecForm(await api('/api/spec'));
  } catch { /* shown in #error */ }
}

function formBody() {
  return {
    pallet_spec: state.spec ?? null,
    level: state.level,
    planner: $('#opt-planner').value,
    seed: Number.parseInt($('#opt-seed').value, 10),
    episodes: Number.parseInt($('#opt-episodes').value, 10),
    speed: Number($('#opt-speed').value),
    perception: $('#opt-perception').value,
    telemetry: $('#opt-telemetry').value,
    stability: $('#opt-stability').checked,
  };
}

async function startRun() {
  try {
    if (!(await checkSpec())) {
      showError('the pallet spec has problems: see the list under "pallet spec"');
      return;
    }
    const run = await api('/api/runs', { method: 'POST', body: formBody() });
    if (run) applyStatus(run);
  } catch { /* shown in #error */ }
}

async function stopRun() {
  try {
    const run = await api('/api/runs/stop', { method: 'POST' });
    if (run) applyStatus(run);
  } catch { /* shown in #error */ }
}

// ---------------------------------------------------------------- tables

function cartonRows(rows) {
  return (rows || []).map((r) => {
    const v = String(r.verdict ?? '');
    const cls = v === 'ok' ? 'v-ok' : v.startsWith('failed') ? 'v-failed' : v ? 'v-tol' : '';
    return el('tr', { class: cls },
      el('td', { text: r.seq ?? '–' }), el('td', { text: r.package_id ?? '–' }),
      el('td', { text: r.type ?? '–' }), el('td', { text: r.layer ?? '–' }),
      el('td', { class: 'num', text: fmt(r.error_mm) }), el('td', { class: 'num', text: fmt(r.support_pct, 0) }),
      el('td', { class: 'num', text: fmt(r.margin_mm) }), el('td', { class: 'verdict', text: v || '–' }));
  });
}

function cartonTable(rows) {
  return el('table', { class: 'cartons' },
    el('thead', {}, el('tr', {}, ['seq', 'package', 'type', 'layer', 'error mm', 'support %',
      'margin mm', 'verdict'].map((h) => el('th', { text: h })))),
    el('tbody', {}, cartonRows(rows)));
}

// ---------------------------------------------------------------- live status

function appendLog(lines, replace = false) {
  const pre = $('#log');
  const stick = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 30;
  const old = replace || !pre.textContent ? [] : pre.textContent.split('\n');
  const all = old.concat(lines || []).slice(-LOG_MAX);
  pre.textContent = all.join('\n');
  if (stick || replace) pre.scrollTop = pre.scrollHeight;
}

function applyStatus(run) {
  if (!run || typeof run !== 'object') return;
  const prev = state.run?.state;
  state.run = run;
  const st = run.state ?? 'idle';
  const stateEl = $('#run-state');
  stateEl.textContent = st;
  stateEl.className = `state st-${st}`;
  const results = run.results || [];
  $('#run-result').textContent = results.length ? (results[results.length - 1].text ?? '') : '';
  const errBox = $('#run-error');
  errBox.textContent = run.error || '';
  errBox.hidden = !run.error;

  const total = Number(run.cartons_total) || 0;
  const done = Number(run.cartons_done) || 0;
  const prog = $('#progress');
  prog.max = Math.max(1, total);
  prog.value = Math.min(done, Math.max(1, total));
  const epTotal = Number(run.episodes_total) || 0;
  const epDone = Number(run.episodes_done) || 0;
  const k = ACTIVE.has(st) ? Math.min(epDone + 1, epTotal) : epDone;
  $('#progress-text').textContent = `episode ${k}/${epTotal}`;
  $('#carton-count').textContent = total ? `${done}/${total} cartons` : '';

  $('#carton-table tbody').replaceChildren(...cartonRows(run.cartons));
  // Pushed status updates carry an empty log (lines come as "log" messages).
  if (Array.isArray(run.log) && run.log.length) appendLog(run.log, true);
  else if (ACTIVE.has(st) && !(prev && ACTIVE.has(prev))) appendLog([], true);
  applyRunToForm(run);
  updateBadge();
  // A run just ended: its results are now in the history.
  if (prev && ACTIVE.has(prev) && !ACTIVE.has(st)) loadHistory().catch(() => {});
}

function applyLive(live) {
  if (!live || typeof live !== 'object') return;
  view3d.update(live.scene);
  drawHeightmap($('#heightmap'), live.heightmap);
  const m = live.scene?.margin_mm;
  $('#margin-text').textContent = m == null ? '' : `stability margin ${fmt(m)} mm`;
  const seq = Number(live.camera_seq) || 0;
  if (seq > 0 && seq !== state.cameraSeq) {
    state.cameraSeq = seq;
    $('#camera').src = `/api/live/camera.png?n=${seq}`;
  }
}

function connectWs() {
  const proto = location.protocol === 'https:' ? 'wss' : 'ws';
  const ind = $('#ws-state');
  let ws;
  try {
    ws = new WebSocket(`${proto}://${location.host}/ws`);
  } catch {
    setTimeout(connectWs, 2000);
    return;
  }
  ws.onopen = () => { ind.textContent = 'live'; ind.className = 'ws-state ok'; };
  ws.onmessage = (ev) => {
    let msg;
    try { msg = JSON.parse(ev.data); } catch { return; }
    if (msg.type === 'status') applyStatus(msg.run);
    else if (msg.type === 'log') appendLog(msg.lines);
    else if (msg.type === 'live') applyLive(msg.live);
    else if (msg.type === 'robot') view3d.setRobot(msg.robot);
    else if (msg.type === 'joints') view3d.setJoints(msg.joints);
  };
  ws.onclose = () => {
    ind.textContent = 'reconnecting…';
    ind.className = 'ws-state down';
    setTimeout(connectWs, 2000);
  };
  ws.onerror = () => { /* onclose follows and retries */ };
}

// ---------------------------------------------------------------- 3D view

function createView(canvas) {
  const renderer = new THREE.WebGLRenderer({ canvas, antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(Math.min(window.devicePixelRatio || 1, 2));
  const scene = new THREE.Scene();
  scene.background = new THREE.Color(0xf2f4f7);
  const camera = new THREE.PerspectiveCamera(40, 1, 0.01, 50);
  camera.up.set(0, 0, 1);
  camera.position.set(1.9, -2.45, 1.75); // the pallet and the arm beside it (base at y -0.72)
  const controls = new OrbitControls(camera, canvas);
  controls.target.set(0, -0.3, 0.45);
  controls.enableDamping = true;
  controls.update();

  scene.add(new THREE.HemisphereLight(0xffffff, 0x888877, 1.6));
  const sun = new THREE.DirectionalLight(0xffffff, 1.6);
  sun.position.set(1.5, -1, 3);
  scene.add(sun);

  const grid = new THREE.GridHelper(3, 15, 0xb8bec8, 0xd6dae0);
  grid.rotation.x = Math.PI / 2;
  grid.position.z = -0.145;
  scene.add(grid);

  // Pallet: deck top at z = 0.
  const palletMat = new THREE.MeshStandardMaterial({ color: 0xb8864b, roughness: 0.9 });
  const pallet = new THREE.Mesh(new THREE.BoxGeometry(1, 1, 1), palletMat);
  const palletEdges = new THREE.LineSegments(new THREE.EdgesGeometry(pallet.geometry),
    new THREE.LineBasicMaterial({ color: 0x6e4b22 }));
  pallet.add(palletEdges);
  scene.add(pallet);
  const setPallet = (p) => {
    const L = p?.length ?? 1.2, W = p?.width ?? 0.8, H = p?.deck_height ?? 0.144;
    pallet.scale.set(L, W, H);
    pallet.position.set(0, 0, -H / 2);
  };
  setPallet(null);

  // Cartons: one unit box geometry and one material per state, meshes pooled.
  const unitBox = new THREE.BoxGeometry(1, 1, 1);
  const unitEdges = new THREE.EdgesGeometry(unitBox);
  const stateColor = { placed: 0x3fae5a, tolerance: 0xf08c1a, failed: 0xd8342c };
  const boxMats = {}, edgeMats = {};
  for (const [k, c] of Object.entries(stateColor)) {
    boxMats[k] = new THREE.MeshStandardMaterial({ color: c, transparent: true, opacity: 0.55,
      depthWrite: false, roughness: 0.7 });
    edgeMats[k] = new THREE.LineBasicMaterial({ color: new THREE.Color(c).multiplyScalar(0.55) });
  }
  const cartonGroup = new THREE.Group();
  scene.add(cartonGroup);
  const pool = [];

  const cogMark = (color) => {
    // Transparent queue + high renderOrder + no depth test: drawn after (over) the cartons.
    const sphere = new THREE.Mesh(new THREE.SphereGeometry(0.03, 20, 14),
      new THREE.MeshStandardMaterial({ color, roughness: 0.4, depthTest: false, transparent: true }));
    const lineGeo = new THREE.BufferGeometry();
    lineGeo.setAttribute('position', new THREE.Float32BufferAttribute(new Float32Array(6), 3));
    const line = new THREE.Line(lineGeo, new THREE.LineBasicMaterial({ color, depthTest: false, transparent: true }));
    const foot = new THREE.Mesh(new THREE.CircleGeometry(0.014, 16),
      new THREE.MeshBasicMaterial({ color, depthTest: false, transparent: true }));
    for (const o of [sphere, line, foot]) o.renderOrder = 10;
    const g = new THREE.Group();
    g.add(sphere, line, foot);
    g.visible = false;
    scene.add(g);
    return (p) => {
      if (!Array.isArray(p) || p.length < 3 || p.some((v) => typeof v !== 'number')) {
        g.visible = false;
        return;
      }
      g.visible = true;
      sphere.position.set(p[0], p[1], p[2]);
      foot.position.set(p[0], p[1], 0.003);
      const a = lineGeo.attributes.position;
      a.setXYZ(0, p[0], p[1], p[2]);
      a.setXYZ(1, p[0], p[1], 0);
      a.needsUpdate = true;
      lineGeo.computeBoundingSphere();
    };
  };
  const setCogTrue = cogMark(0x1f5fe0);
  const setCogMeasured = cogMark(0xd21fd2);

  const supportMat = new THREE.LineBasicMaterial({ color: 0xffd000, depthTest: false, transparent: true });
  const support = new THREE.LineLoop(new THREE.BufferGeometry(), supportMat);
  support.renderOrder = 9;
  scene.add(support);

  function update(sc) {
    setPallet(sc?.pallet);
    const cartons = Array.isArray(sc?.cartons) ? sc.cartons : [];
    cartons.forEach((c, i) => {
      let item = pool[i];
      if (!item) {
        const mesh = new THREE.Mesh(unitBox, boxMats.placed);
        const edges = new THREE.LineSegments(unitEdges, edgeMats.placed);
        mesh.add(edges);
        cartonGroup.add(mesh);
        item = pool[i] = { mesh, edges };
      }
      const d = Array.isArray(c.dims) ? c.dims : [0.3, 0.2, 0.2];
      const p = c.pose || {};
      const st = boxMats[c.state] ? c.state : 'placed';
      item.mesh.material = boxMats[st];
      item.edges.material = edgeMats[st];
      item.mesh.scale.set(d[0] || 0.01, d[1] || 0.01, d[2] || 0.01);
      item.mesh.position.set(p.x ?? 0, p.y ?? 0, p.z ?? (d[2] || 0) / 2);
      item.mesh.rotation.set(0, 0, p.yaw ?? 0);
      item.mesh.visible = true;
    });
    for (let i = cartons.length; i < pool.length; i++) pool[i].mesh.visible = false;

    setCogTrue(sc?.cog_true);
    setCogMeasured(sc?.cog_measured);

    const pts = (Array.isArray(sc?.support) ? sc.support : [])
      .filter((q) => Array.isArray(q) && q.length >= 2)
      .map((q) => new THREE.Vector3(q[0], q[1], 0.002));
    support.geometry.dispose();
    support.geometry = new THREE.BufferGeometry().setFromPoints(pts);
    support.visible = pts.length >= 2;
  }

  // The robot from /robot_description, rebuilt when the URDF changes, moved by /joint_states.
  let robot = null, robotUrdf = null;
  function setRobot(r) {
    const urdf = typeof r?.urdf === 'string' ? r.urdf : null;
    if (urdf !== robotUrdf) {
      if (robot) { scene.remove(robot.group); robot.dispose(); }
      robot = null;
      robotUrdf = urdf;
      if (urdf) {
        try {
          robot = buildRobot(parseUrdf(urdf));
          scene.add(robot.group);
        } catch (err) {
          showError(`robot description: ${err.message}`);
        }
      }
    }
    robot?.setOrigin(r?.origin);
    robot?.setJoints(r?.joints);
  }
  const setJoints = (joints) => robot?.setJoints(joints);
  const robotInfo = () => (robot ? { ...robot.stats(), linkPosition: robot.linkPosition } : null);

  function frame() {
    const w = canvas.clientWidth, h = canvas.clientHeight;
    const pr = renderer.getPixelRatio();
    if (w > 0 && h > 0 && (canvas.width !== Math.floor(w * pr) || canvas.height !== Math.floor(h * pr))) {
      renderer.setSize(w, h, false);
      camera.aspect = w / h;
      camera.updateProjectionMatrix();
    }
    controls.update();
    renderer.render(scene, camera);
    requestAnimationFrame(frame);
  }
  requestAnimationFrame(frame);
  return { update, setRobot, setJoints, robotInfo };
}

let view3d = { update() {}, setRobot() {}, setJoints() {}, robotInfo: () => null };

// ---------------------------------------------------------------- height map

function drawHeightmap(cv, hm) {
  const ctx = cv.getContext('2d');
  const W = cv.width, H = cv.height;
  ctx.fillStyle = '#f2f4f7';
  ctx.fillRect(0, 0, W, H);
  const nx = hm?.nx | 0, ny = hm?.ny | 0;
  if (!hm || nx <= 0 || ny <= 0 || !Array.isArray(hm.cells)) {
    ctx.fillStyle = '#889';
    ctx.font = '13px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.fillText('no height map', W / 2, H / 2);
    return;
  }
  const cs = Math.min(W / nx, H / ny);
  const ox = (W - cs * nx) / 2, oy = (H - cs * ny) / 2;
  const observed = Array.isArray(hm.observed) ? hm.observed : null;
  for (let j = 0; j < ny; j++) {
    const y = oy + (ny - 1 - j) * cs; // row j = y index, drawn with y up
    for (let i = 0; i < nx; i++) {
      const k = j * nx + i;
      const x = ox + i * cs;
      const h = hm.cells[k];
      if ((observed && !observed[k]) || typeof h !== 'number' || !Number.isFinite(h)) {
        ctx.fillStyle = '#3d6fd1';
        ctx.fillRect(x, y, cs + 0.5, cs + 0.5);
        ctx.strokeStyle = '#9db8ee';
        ctx.lineWidth = 1;
        ctx.beginPath();
        ctx.moveTo(x, y + cs);
        ctx.lineTo(x + cs, y);
        ctx.stroke();
      } else {
        const t = Math.max(0, Math.min(1, h / 0.55));
        ctx.fillStyle = `hsl(${(1 - t) * 120}, 70%, ${48 - 6 * t}%)`;
        ctx.fillRect(x, y, cs + 0.5, cs + 0.5);
      }
    }
  }
  ctx.strokeStyle = '#555';
  ctx.lineWidth = 1;
  ctx.strokeRect(ox + 0.5, oy + 0.5, cs * nx - 1, cs * ny - 1);
}

// ---------------------------------------------------------------- charts

// Bar chart; negative bars are red when `negRed` is set. Shows the max value.
// One colour per carton-cycle phase (core/vocab.py CyclePhase): pick side blue, waits grey,
// place side green, the gripper's still readings warm.
const PHASE_COLORS = {
  wait: '#b8b8b8', detect: '#8c6bb1', return: '#9ecae1', descend: '#4a7bd0', dwell: '#fdae6b',
  seal: '#e6550d', lift: '#2b5fa8', measure: '#bcbddc', weigh: '#f0c419', plan: '#756bb1',
  photo: '#636363', cross: '#31a354', place: '#74c476', release: '#a1d99b', retract: '#1b7a3a',
  settle: '#d6616b', buffer: '#843c39',
};

function drawBars(cv, values, labels, { unit = '', color = '#4a7bd0', negRed = false, stacks = [] } = {}) {
  const dpr = window.devicePixelRatio || 1;
  const W = cv.clientWidth || Number(cv.getAttribute('width')) || 300;
  const H = cv.clientHeight || Number(cv.getAttribute('height')) || 130;
  cv.width = Math.round(W * dpr);
  cv.height = Math.round(H * dpr);
  const ctx = cv.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = '#fff';
  ctx.fillRect(0, 0, W, H);
  ctx.font = '11px system-ui, sans-serif';
  const vals = values.map((v) => (typeof v === 'number' && Number.isFinite(v) ? v : 0));
  if (!vals.length) {
    ctx.fillStyle = '#889';
    ctx.textAlign = 'center';
    ctx.fillText('no data', W / 2, H / 2);
    return;
  }
  const top = 16, bottom = 18, left = 6, right = 6;
  const hi = Math.max(0, ...vals), lo = Math.min(0, ...vals);
  const span = hi - lo || 1;
  const plotH = H - top - bottom;
  const yOf = (v) => top + ((hi - v) / span) * plotH;
  const slot = (W - left - right) / vals.length;
  const bw = Math.max(1, slot * 0.75);
  vals.forEach((v, i) => {
    const x = left + i * slot + (slot - bw) / 2;
    const y0 = yOf(0), y1 = yOf(v);
    const parts = Array.isArray(stacks[i]) ? stacks[i] : null;
    if (parts && v > 0) {
      // The carton's phases, first at the bottom: the bar is their sum.
      let at = 0;
      parts.forEach(([name, s]) => {
        if (!(s > 0)) return;
        ctx.fillStyle = PHASE_COLORS[name] || '#999';
        ctx.fillRect(x, yOf(at + s), bw, Math.max(0.5, yOf(at) - yOf(at + s)));
        at += s;
      });
      return;
    }
    ctx.fillStyle = negRed && v < 0 ? '#d8342c' : color;
    ctx.fillRect(x, Math.min(y0, y1), bw, Math.max(1, Math.abs(y1 - y0)));
  });
  ctx.strokeStyle = '#666';
  ctx.beginPath();
  ctx.moveTo(left, yOf(0) + 0.5);
  ctx.lineTo(W - right, yOf(0) + 0.5);
  ctx.stroke();
  ctx.fillStyle = '#333';
  ctx.textAlign = 'left';
  const maxV = Math.max(...vals), minV = Math.min(...vals);
  let head = `max ${maxV.toFixed(1)} ${unit}`;
  if (minV < 0) head += ` · min ${minV.toFixed(1)} ${unit}`;
  ctx.fillText(head, left, 11);
  if (slot >= 22) {
    ctx.textAlign = 'center';
    ctx.fillStyle = '#666';
    labels.forEach((l, i) => ctx.fillText(String(l).slice(0, Math.floor(slot / 6)), left + (i + 0.5) * slot, H - 5));
  }
}

function chartBlock(cls, title, values, labels, opts, legend = null) {
  const cv = el('canvas', { class: cls, width: 300, height: 130 });
  const fig = el('figure', { class: 'chart' }, el('figcaption', { text: title }), cv);
  if (legend) fig.append(legend);
  requestAnimationFrame(() => drawBars(cv, values, labels, opts)); // after layout
  return fig;
}

// The phases the cycle bars show, in the order they first appear, each with its colour.
function phaseLegend(cyc) {
  const names = [];
  cyc.forEach((c) => (Array.isArray(c.phases) ? c.phases : []).forEach(([n, s]) => {
    if (s > 0 && !names.includes(n)) names.push(n);
  }));
  if (!names.length) return null;
  return el('div', { class: 'phase-legend' }, names.map((n) => el('span', { class: 'phase' },
    el('i', { style: `background:${PHASE_COLORS[n] || '#999'}` }), n)));
}

function episodeCharts(ep) {
  const cyc = Array.isArray(ep.cycle_s) ? ep.cycle_s : [];
  const mar = Array.isArray(ep.margins_mm) ? ep.margins_mm : [];
  return el('div', { class: 'charts' },
    chartBlock('chart-cycle', 'cycle time per carton [s]', cyc.map((c) => c.s),
      cyc.map((c) => c.package_id ?? ''), { unit: 's', stacks: cyc.map((c) => c.phases) },
      phaseLegend(cyc)),
    chartBlock('chart-margin', 'stability margin per placement [mm]', mar.map((m) => m.mm),
      mar.map((m) => m.seq ?? ''), { unit: 'mm', color: '#3fae5a', negRed: true }));
}

// ---------------------------------------------------------------- history

function outcomeText(ep) {
  const aborted = ep.abort_reason ? `ABORTED (${ep.abort_reason})` : 'ABORTED';
  const head = ep.success ? 'SUCCESS' : ep.aborted ? aborted : ep.open ? 'OPEN'
    : `FAILED${ep.failure ? `: ${ep.failure}` : ''}`;
  const parts = [`seed ${ep.seed ?? '–'}`, `level ${ep.level ?? '–'}`,
    `${ep.n_placed ?? '–'}/${ep.n_objects ?? '–'} placed`, head];
  if (ep.duration_s != null) parts.push(`${fmt(ep.duration_s)} s`);
  if (ep.oracle) parts.push('oracle');
  return parts.join(' · ');
}

function kvTable(obj) {
  return el('table', { class: 'kv' }, el('tbody', {}, Object.entries(obj).map(([k, v]) =>
    el('tr', {}, el('th', { text: k }),
      el('td', { text: v !== null && typeof v === 'object' ? JSON.stringify(v) : fmt(v, 3) })))));
}

function episodeBlock(ep, i) {
  const snaps = Array.isArray(ep.snapshots) ? ep.snapshots : [];
  return el('div', { class: 'episode' },
    el('h4', {}, `episode ${i + 1} `,
      el('span', { class: ep.success ? 'ok' : 'bad', text: outcomeText(ep) })),
    el('div', { class: 'table-wrap' }, cartonTable(ep.cartons)),
    snaps.length ? el('div', { class: 'snapshots' }, snaps.map((s) =>
      el('figure', {}, el('img', { class: 'snapshot', src: s.url, alt: `${s.view} after ${s.after_seq}`, loading: 'lazy' }),
        el('figcaption', { text: `${s.view ?? ''} after #${s.after_seq ?? '?'}` })))) : null,
    episodeCharts(ep),
    ep.stability && typeof ep.stability === 'object'
      ? el('div', { class: 'stability' }, el('h5', { text: 'stability' }), kvTable(ep.stability)) : null);
}

async function loadHistory() {
  const data = await api('/api/history');
  const runs = Array.isArray(data?.runs) ? data.runs : [];
  const rep = data?.replica;
  $('#replica-note').textContent = !rep?.configured ? 'history from disk'
    : rep.error ? `disk only: ${rep.error}` : 'history from disk and the replica';
  const checked = new Set([...document.querySelectorAll('.compare-pick:checked')].map((c) => c.dataset.name));
  const selected = $('.history-row.selected')?.dataset.name;
  $('#history-table tbody').replaceChildren(...runs.map((r) => {
    const pick = el('input', { type: 'checkbox', class: 'compare-pick', dataset: { name: r.name },
      checked: checked.has(r.name), onclick: (e) => e.stopPropagation(), onchange: updateCompareButton });
    return el('tr', { class: `history-row${r.name === selected ? ' selected' : ''}`, dataset: { name: r.name },
      onclick: () => showDetail(r.name) },
    el('td', {}, pick), el('td', { class: 'name', text: r.name }), el('td', { text: r.origin ?? '' }),
    el('td', { text: r.level ?? '' }), el('td', { text: r.task ?? '' }),
    el('td', { class: 'num', text: r.episodes ?? '' }),
    el('td', { class: 'num', text: r.succeeded ?? '' }),
    el('td', { class: 'num', text: `${r.placed ?? '–'}/${r.cartons ?? '–'}` }),
    el('td', { text: r.oracle ? 'yes' : '' }), el('td', { class: 'mono', text: r.git_sha ?? '' }));
  }));
  if (!runs.length) {
    $('#history-table tbody').append(el('tr', {}, el('td', { colspan: 10, class: 'muted', text: 'no runs yet' })));
  }
  updateCompareButton();
}

function updateCompareButton() {
  $('#compare').disabled = document.querySelectorAll('.compare-pick:checked').length !== 2;
}

const historyPath = (name) => `/api/history/${encodeURIComponent(name)}`;

async function showDetail(name) {
  for (const tr of document.querySelectorAll('.history-row')) {
    tr.classList.toggle('selected', tr.dataset.name === name);
  }
  const box = $('#history-detail');
  let d;
  try {
    d = await api(historyPath(name));
  } catch {
    return;
  }
  const eps = Array.isArray(d?.episodes) ? d.episodes : [];
  box.replaceChildren(
    el('h3', {}, d.name ?? name, el('span', { class: 'muted', text: ` · ${d.origin ?? ''} · ${eps.length} episode(s)` })),
    ...(eps.length ? eps.map(episodeBlock) : [el('p', { class: 'muted', text: 'no episodes recorded' })]));
}

async function compareRuns() {
  const names = [...document.querySelectorAll('.compare-pick:checked')].map((c) => c.dataset.name);
  if (names.length !== 2) return;
  let runs;
  try {
    runs = await Promise.all(names.map((n) => api(historyPath(n))));
  } catch {
    return;
  }
  $('#compare-view').replaceChildren(
    el('h3', { text: 'compare' }),
    el('div', { class: 'compare-cols' }, runs.map((d, i) => {
      const eps = Array.isArray(d?.episodes) ? d.episodes : [];
      const ok = eps.filter((e) => e.success).length;
      const placed = eps.reduce((a, e) => a + (Number(e.n_placed) || 0), 0);
      const total = eps.reduce((a, e) => a + (Number(e.n_objects) || 0), 0);
      return el('div', { class: 'compare-col' },
        el('h4', { text: d?.name ?? names[i] }),
        el('p', { class: 'summary', text: `${ok}/${eps.length} episodes succeeded · ${placed}/${total} cartons placed` }),
        el('ul', { class: 'outcomes' }, eps.map((e) => el('li', { class: e.success ? 'ok' : 'bad', text: outcomeText(e) }))),
        eps.map((e, k) => el('div', { class: 'compare-ep' },
          el('div', { class: 'muted', text: `episode ${k + 1} (seed ${e.seed ?? '–'})` }), episodeCharts(e))));
    })));
}

// ---------------------------------------------------------------- init

function init() {
  $('#error').addEventListener('click', clearError);
  $('#start').addEventListener('click', startRun);
  $('#stop').addEventListener('click', stopRun);
  $('#opt-telemetry').addEventListener('change', updateBadge);
  $('#history-refresh').addEventListener('click', () => loadHistory().catch(() => {}));
  $('#compare').addEventListener('click', compareRuns);
  const cam = $('#camera');
  cam.addEventListener('load', () => {
    cam.hidden = false;
    $('#camera-caption').textContent = `station camera · frame ${state.cameraSeq}`;
  });
  cam.addEventListener('error', () => { $('#camera-caption').textContent = 'station camera: no frame'; });

  try {
    view3d = createView($('#scene3d'));
    // What the 3D view holds of the robot, for the browser tests and the console.
    window.panelRobot = () => view3d.robotInfo();
  } catch (err) {
    showError(`3D view unavailable: ${err.message}`);
  }
  drawHeightmap($('#heightmap'), null);

  // Sequential so a failure in one does not hide the error of another.
  (async () => {
    for (const job of [loadOptions, loadSpecEditor, () => api('/api/run').then(applyStatus), loadHistory]) {
      try { await job(); } catch { /* shown in #error */ }
    }
  })();
  connectWs();
}

init();
