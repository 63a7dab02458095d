// ONNX Runtime's own per-node profile of a model, for bench/layer_compare.py.
//   ORT_NODE_DIR=.../node_modules/onnxruntime-node node bench/ort_profile.js MODEL.onnx INPUT.npy
//       THREADS RUNS OUT_PREFIX
// Same session options as shared/peers/ort_bench.js (all graph optimisations, sequential, intra-op
// THREADS) plus enableProfiling; runs RUNS times on INPUT.npy (float32) and prints the profile
// file's path (Chrome trace JSON: one "Node" event per kernel run, with op_name and the
// input / output shapes). Profiling adds ~5 us inside each node's time and more between nodes:
// compare per-node figures, not the run's total.
'use strict';
const fs = require('fs');

function readNpyF32(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not .npy`);
  const v1 = buf[6] === 1;
  const hlen = v1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = v1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + hlen);
  if (!/'descr':\s*'<f4'/.test(header)) throw new Error(`${file}: need float32, got ${header}`);
  const shape = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(',').filter(s => s.trim()).map(Number);
  const off = buf.byteOffset + start + hlen;
  return { shape, data: new Float32Array(buf.buffer.slice(off, buf.byteOffset + buf.length)) };
}

(async () => {
  const [model, input, threads, runs, prefix] = process.argv.slice(2);
  if (!prefix) throw new Error('usage: ort_profile.js MODEL INPUT.npy THREADS RUNS OUT_PREFIX');
  const ort = require(process.env.ORT_NODE_DIR || 'onnxruntime-node');
  const sess = await ort.InferenceSession.create(model, {
    intraOpNumThreads: +threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
    executionMode: 'sequential', logSeverityLevel: 3, enableProfiling: true,
    profileFilePrefix: prefix,
  });
  const x = readNpyF32(input);
  const feeds = { [sess.inputNames[0]]: new ort.Tensor('float32', x.data, x.shape) };
  for (let i = 0; i < +runs; i++) await sess.run(feeds);
  sess.endProfiling();
  const dir = require('path').dirname(prefix), base = require('path').basename(prefix);
  const files = fs.readdirSync(dir).filter(f => f.startsWith(base) && f.endsWith('.json'));
  files.sort((a, b) => fs.statSync(`${dir}/${b}`).mtimeMs - fs.statSync(`${dir}/${a}`).mtimeMs);
  console.log(`${dir}/${files[0]}`);
})().catch(e => { console.error(e.message); process.exit(1); });
