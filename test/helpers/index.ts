/**
 * The helpers that tests and the benchmark (bench/) both use, in one import: ports, processes
 * read from /proc, the server as a child process, redis-server, keys, images and the grpc-js
 * client. Nothing here imports vitest, so plain scripts can load it; no file under src/ may
 * import it.
 */
export { createTestAnalyzer } from "./analyzer.js";
export { callUnary, createGrpcJsClient, decodeGrpcError, type GrpcJsResult } from "./grpc.js";
export { openH2Session } from "./h2.js";
export { makeHandPhoto, makeImage } from "./images.js";
export { registerKey } from "./keys.js";
export { freePort } from "./ports.js";
export {
  cpuSecondsOf,
  isAlive,
  machineCores,
  machineCpu,
  processRunNs,
  processTree,
  runNs,
  schedPolicies,
  statusBytes,
  sumOver,
} from "./proc.js";
export { startRedis, uniquePrefix, type RedisProcess } from "./redis.js";
export {
  ServerStartError,
  startCommand,
  startServerProcess,
  trackPeakRss,
  type ServerProcess,
  type ServerProcessOptions,
} from "./server-process.js";
