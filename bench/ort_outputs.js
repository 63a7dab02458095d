// Run: ORT_NODE_DIR=DIR/node_modules/onnxruntime-node node bench/ort_outputs.js MODEL.onnx [MODEL.onnx ...]
// Runs ONNX Runtime (CPU, 1 thread) once on MODEL.input.npy (float32, the model's first input)
// and writes every output i as MODEL.ort<i>.npy (float32 or int64), for comparing Kiln with ORT
// where PyTorch's output is not the reference (e.g. bench/det_check.py --ort: torchvision's
// RoiAlign export, which ONNX reads differently from PyTorch).
'use strict';
const fs = require('fs');

const ort = (() => {
  try { return require('onnxruntime-node'); } catch (e) { /* fall through */ }
  if (!process.env.ORT_NODE_DIR) throw new Error('set ORT_NODE_DIR (../shared/peers/README.md)');
  return require(process.env.ORT_NODE_DIR);
})();

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not .npy`);
  const hlen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const hstart = buf[6] === 1 ? 10 : 12;
  const header = buf.toString('latin1', hstart, hstart + hlen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    throw new Error(`${file}: need <f4 C-order, got ${header}`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const off = hstart + hlen;
  return { shape, data: new Float32Array(buf.buffer.slice(buf.byteOffset + off, buf.byteOffset + buf.length)) };
}

function writeNpy(file, tensor) {
  const descr = { float32: '<f4', int64: '<i8', bool: '|b1', int32: '<i4' }[tensor.type];
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
    const x = readNpyF32(`${base}.input.npy`);
    const out = await sess.run({ [sess.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) });
    sess.outputNames.forEach((name, i) => writeNpy(`${base}.ort${i}.npy`, out[name]));
    console.log(`${model}: ${sess.outputNames.length} outputs written (${base}.ort<i>.npy)`);
    await sess.release();
  }
})().catch(e => { console.error(e.message || e); process.exit(1); });
