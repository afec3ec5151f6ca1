// The cluster this shard belongs to (GET /v1/cluster, the shard's SCEMON_CLUSTER): a
// selector in the bar that opens another shard's console. Each shard's console shows
// that shard; `scemon cluster stats` sums them.

import { api } from "./api.js";

/** Whether `url` is the shard serving this page. */
function isThisShard(url) {
  try {
    return new URL(url).origin === location.origin;
  } catch {
    return false;
  }
}

/** Fill `select` with the cluster's shards and show it, when there are two or more;
 * choosing one opens its console (which asks for its own token: tokens are kept per
 * address). A shard told of no cluster, or one too old to say, shows nothing. */
export async function showShards(select) {
  let shards = [];
  try {
    ({ shards } = await api("v1/cluster"));
  } catch {
    shards = [];
  }
  select.dataset.shards = String(Array.isArray(shards) ? shards.length : 0);
  if (!Array.isArray(shards) || shards.length < 2) return;
  const current = shards.findIndex(isThisShard);
  const options = shards.map(
    (url, i) => new Option(`shard ${i} of ${shards.length}: ${url}`, url, false, i === current),
  );
  if (current < 0) options.unshift(new Option("this shard", "", true, true));
  select.replaceChildren(...options);
  select.onchange = () => {
    if (select.value) location.assign(select.value.replace(/\/?$/, "/"));
  };
  select.hidden = false;
}
