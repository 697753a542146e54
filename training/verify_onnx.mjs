// Runs the exported model with onnxruntime-node on a raw float32 input and writes the raw output.
// usage: node training/verify_onnx.mjs model.onnx input.bin N output.bin
import { readFileSync, writeFileSync } from "node:fs";
import ort from "onnxruntime-node";

const [model, input, n, output] = process.argv.slice(2);
const N = Number(n);
const buf = readFileSync(input);
const data = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
const side = Math.round(Math.sqrt(data.length / (3 * N))); // the view's side (input_size), from the input's length
const session = await ort.InferenceSession.create(model);
const feeds = { image: new ort.Tensor("float32", data, [N, 3, side, side]) };
const t0 = performance.now();
const out = await session.run(feeds);
const ms = performance.now() - t0;
const probs = out.probs;
writeFileSync(output, Buffer.from(probs.data.buffer, probs.data.byteOffset, probs.data.byteLength));
console.log(JSON.stringify({ inputNames: session.inputNames, outputNames: session.outputNames, dims: probs.dims, ms }));
