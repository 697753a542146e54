/**
 * The fair order in which waiting jobs are handed to workers, client by client in turn (round
 * robin), shared by the admission queue (src/inference/admission.ts) and the REST codec
 * (src/rest/rest-codec.ts). Tests: admission.spec.ts and rest-codec.spec.ts, "in turn".
 */

/**
 * nextInTurn is the index in `waiting` of the next job to hand out: the oldest ready one of the
 * first client after `lastClient` (the one served last) in the clients' sorted order, wrapping
 * around; -1 when none is ready.
 */
export function nextInTurn<T extends { client: string }>(
  waiting: readonly T[],
  lastClient: string,
  ready: (job: T) => boolean = () => true,
): number {
  const firstOf = new Map<string, number>();
  waiting.forEach((job, i) => {
    if (ready(job) && !firstOf.has(job.client)) firstOf.set(job.client, i);
  });
  if (firstOf.size === 0) return -1;
  const clients = [...firstOf.keys()].sort();
  return firstOf.get(clients.find((c) => c > lastClient) ?? clients[0]) as number;
}
