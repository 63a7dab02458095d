// Run: ORT_NODE_DIR=DIR/node_modules/onnxruntime-node node bench/ort_outputs.js MODEL.onnx [MODEL.onnx ...]
// Runs ONNX Runtime (CPU, 1 thread) once on MODEL.input.npy (the model's first input: float32,
// uint8 or int8) and writes every output i as MODEL.ort<i>.npy, for comparing Kiln with ORT
// where PyTorch's output is not the reference (e.g. bench/det_check.py --ort: torchvision's
// RoiAlign export, which ONNX reads differently from PyTorch).
'use strict';
const fs = require('fs');

const ort = (() => {
  try { return require('onnxruntime-node'); } catch (e) { /* fall through */ }
  if (!process.env.ORT_NODE_DIR) throw new Error('set ORT_NODE_DIR (../shared/peers/README.md)');
  return require(process.env.ORT_NODE_DIR);
})();

const kNpyTypes = { '<f4': ['float32', Float32Array], '|u1': ['uint8', Uint8Array],
                   '|i1': ['int8', Int8Array] };

function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not .npy`);
  const hlen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = buf[6] === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  const descr = (header.match(/'descr':\s*'([^']*)'/) || [])[1];
  if (!kNpyTypes[descr] || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: need <f4, |u1 or |i1 C-order, got ${header}`);
  const [type, Arr] = kNpyTypes[descr];
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const off = hstart + hlen;
  return { type, shape,
           data: new Arr(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + buf.length)) };
}

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', int64: '<i8', bool: '|b1', int32: '<i4', uint8: '|u1',
                  int8: '|i1' }[tensor.type];
  if (!descr) throw new Error(`${file}: output type ${tensor.type} not written`);
  const dims = tensor.dims.join(', ') + (tensor.dims.length === 1 ? ',' : '');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';  // 64-byte aligned, ends in \n
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1; head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const d = tensor.data;
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
                                        Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

(async () => {
  for (const model of process.argv.slice(2)) {
    const base = model.replace(/\.onnx$/, '');
    const sess = await ort.InferenceSession.create(model, {
      intraOpNumThreads: 1, interOpNumThreads: 1, logSeverityLevel: 3 });
    const x = readNpy(`${base}.input.npy`);
    const out = await sess.run({ [sess.inputNames[0]]: new ort.Tensor(x.type, x.data, x.shape) });
    sess.outputNames.forEach((name, i) => writeNpy(`${base}.ort${i}.npy`, out[name]));
    console.log(`${model}: ${sess.outputNames.length} outputs written (${base}.ort<i>.npy)`);
    await sess.release();
  }
})().catch(e => { console.error(e.message || e); process.exit(1); });
