// The robot in the 3D view, built from a URDF (the text of /robot_description) and moved by
// joint positions (/joint_states). Follows the URDF spec (wiki.ros.org/urdf/XML): links and their
// <visual> elements (box, cylinder, sphere; a mesh needs its file, which the page does not have,
// so it is counted and skipped), joints (fixed, revolute, continuous, prismatic, with mimic) and
// materials, named at the top level or inline. Frames are z-up like the scene's.
import * as THREE from 'three';

const nums = (text, n, fallback) => {
  const v = String(text ?? '').trim().split(/\s+/).filter(Boolean).map(Number);
  return v.length === n && v.every(Number.isFinite) ? v : fallback;
};

// <origin xyz rpy>: rpy are fixed-axis roll, pitch, yaw, so R = Rz(yaw) Ry(pitch) Rx(roll),
// which is three.js's Euler order 'ZYX'.
function applyOrigin(obj, origin) {
  const [x, y, z] = nums(origin?.getAttribute('xyz'), 3, [0, 0, 0]);
  const [r, p, yw] = nums(origin?.getAttribute('rpy'), 3, [0, 0, 0]);
  obj.position.set(x, y, z);
  obj.rotation.set(r, p, yw, 'ZYX');
}

const child = (node, tag) => [...node.children].find((c) => c.tagName === tag) ?? null;
const kids = (node, tag) => [...node.children].filter((c) => c.tagName === tag);

// Parse the URDF text into plain data; throws with the reason when it is not a URDF.
export function parseUrdf(text) {
  const doc = new DOMParser().parseFromString(String(text), 'application/xml');
  const robot = doc.documentElement;
  if (doc.querySelector('parsererror') || robot?.tagName !== 'robot') {
    throw new Error('the robot description is not a URDF (<robot> XML)');
  }
  const colorOf = (mat) => {
    const c = mat && child(mat, 'color');
    return c ? nums(c.getAttribute('rgba'), 4, null) : null;
  };
  const materials = new Map();
  for (const m of kids(robot, 'material')) materials.set(m.getAttribute('name'), colorOf(m));
  const links = kids(robot, 'link').map((link) => ({
    name: link.getAttribute('name'),
    visuals: kids(link, 'visual').map((v) => {
      const geo = child(v, 'geometry');
      const shape = geo ? [...geo.children][0] : null;
      const mat = child(v, 'material');
      return {
        origin: child(v, 'origin'),
        type: shape?.tagName ?? null,
        size: nums(shape?.getAttribute('size'), 3, [0, 0, 0]),
        radius: Number(shape?.getAttribute('radius') ?? 0),
        length: Number(shape?.getAttribute('length') ?? 0),
        rgba: colorOf(mat) ?? (mat ? materials.get(mat.getAttribute('name')) : null) ?? null,
      };
    }),
  }));
  const joints = kids(robot, 'joint').map((j) => {
    const mimic = child(j, 'mimic');
    return {
      name: j.getAttribute('name'),
      type: j.getAttribute('type'),
      parent: child(j, 'parent')?.getAttribute('link'),
      child: child(j, 'child')?.getAttribute('link'),
      origin: child(j, 'origin'),
      axis: nums(child(j, 'axis')?.getAttribute('xyz'), 3, [1, 0, 0]),
      mimic: mimic ? {
        joint: mimic.getAttribute('joint'),
        multiplier: Number(mimic.getAttribute('multiplier') ?? 1),
        offset: Number(mimic.getAttribute('offset') ?? 0),
      } : null,
    };
  });
  return { name: robot.getAttribute('name'), links, joints };
}

function visualMesh(v, cache) {
  let geometry;
  if (v.type === 'box') geometry = new THREE.BoxGeometry(...v.size);
  else if (v.type === 'cylinder') {
    geometry = new THREE.CylinderGeometry(v.radius, v.radius, v.length, 32);
    geometry.rotateX(Math.PI / 2); // three.js's cylinder runs along y, URDF's along z
  } else if (v.type === 'sphere') geometry = new THREE.SphereGeometry(v.radius, 24, 16);
  else return null;
  const rgba = v.rgba ?? [0.62, 0.65, 0.7, 1];
  const key = rgba.join(',');
  if (!cache.has(key)) {
    cache.set(key, new THREE.MeshStandardMaterial({
      color: new THREE.Color(rgba[0], rgba[1], rgba[2]), roughness: 0.55, metalness: 0.1,
      transparent: rgba[3] < 1, opacity: rgba[3],
    }));
  }
  const mesh = new THREE.Mesh(geometry, cache.get(key));
  applyOrigin(mesh, v.origin);
  return mesh;
}

// The robot as a three.js group: link frames under joint frames as the URDF's tree has them.
// setJoints({name: position}) moves it; linkPosition(name) is a link's origin in the scene.
export function buildRobot(model) {
  const group = new THREE.Group();
  group.name = `robot:${model.name ?? ''}`;
  const cache = new Map();
  const links = new Map();
  let meshes = 0, skipped = 0;
  for (const l of model.links) {
    const frame = new THREE.Group();
    frame.name = `link:${l.name}`;
    for (const v of l.visuals) {
      const mesh = visualMesh(v, cache);
      if (mesh) { mesh.userData.robotLink = l.name; frame.add(mesh); meshes += 1; } else skipped += 1;
    }
    links.set(l.name, frame);
  }
  const movers = new Map(); // joint name -> {joint, frame}
  const children = new Set();
  for (const j of model.joints) {
    const parent = links.get(j.parent), childFrame = links.get(j.child);
    if (!parent || !childFrame) continue;
    const origin = new THREE.Group();
    origin.name = `joint:${j.name}`;
    applyOrigin(origin, j.origin);
    const motion = new THREE.Group();
    origin.add(motion);
    motion.add(childFrame);
    parent.add(origin);
    children.add(j.child);
    const axis = new THREE.Vector3(...j.axis);
    if (axis.lengthSq() === 0) axis.set(1, 0, 0);
    movers.set(j.name, { joint: j, motion, axis: axis.normalize() });
  }
  for (const [name, frame] of links) if (!children.has(name)) group.add(frame);

  const positions = {};
  const place = ({ joint, motion, axis }, q) => {
    if (joint.type === 'revolute' || joint.type === 'continuous') {
      motion.quaternion.setFromAxisAngle(axis, q);
    } else if (joint.type === 'prismatic') {
      motion.position.copy(axis).multiplyScalar(q);
    }
  };
  function setJoints(values) {
    for (const [name, q] of Object.entries(values || {})) {
      if (typeof q === 'number' && Number.isFinite(q)) positions[name] = q;
    }
    for (const [name, m] of movers) {
      const mim = m.joint.mimic;
      const q = mim ? (positions[mim.joint] ?? 0) * mim.multiplier + mim.offset : positions[name];
      if (q != null) place(m, q);
    }
  }
  function linkPosition(name) {
    const frame = links.get(name);
    if (!frame) return null;
    group.updateMatrixWorld(true);
    return frame.getWorldPosition(new THREE.Vector3()).toArray();
  }
  function setOrigin(rowMajor) {
    if (!Array.isArray(rowMajor) || rowMajor.length !== 16) return;
    const m = new THREE.Matrix4().set(...rowMajor);
    m.decompose(group.position, group.quaternion, group.scale);
  }
  function dispose() {
    group.traverse((o) => o.geometry?.dispose());
    for (const mat of cache.values()) mat.dispose();
  }
  return {
    group, setJoints, setOrigin, linkPosition, dispose,
    stats: () => ({ links: links.size, joints: movers.size, meshes, skipped }),
  };
}
