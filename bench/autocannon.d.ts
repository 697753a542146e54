/**
 * The part of autocannon's API the benchmark uses (the package ships no types).
 */
declare module "autocannon" {
  interface AutocannonOptions {
    url: string;
    method?: string;
    headers?: Record<string, string>;
    body?: string | Buffer;
    connections?: number;
    amount?: number;
    duration?: number;
    timeout?: number;
    pipelining?: number;
  }
  interface Histogram {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    p50: number;
    p90: number;
    p99: number;
    [k: string]: number;
  }
  interface AutocannonResult {
    latency: Histogram;
    requests: Histogram & { total: number; sent: number };
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    "2xx": number;
    statusCodeStats?: Record<string, { count: number }>;
  }
  /** The run: a promise of the result, and an event emitter ("response" after each response). */
  type Instance = Promise<AutocannonResult> & {
    on(event: "response", listener: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void): Instance;
  };
  function autocannon(options: AutocannonOptions): Instance;
  export default autocannon;
}
