// What an analyst would run instead of `idem reconcile`: DuckDB over the
// three NDJSON files, the same counts per stage and per hop (lost past a
// 60 s grace, duplicated keys, hop latency percentiles, orphans).
//   node bench/reconcile_duckdb.mjs DIR      (DuckDB's Node package, from npm)
import { DuckDBInstance } from '@duckdb/node-api';

const dir = process.argv[2];
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(`create view sent as select id as k, created::timestamp as t from read_json('${dir}/sent.ndjson', format='newline_delimited', columns={id:'varchar', created:'varchar'})`);
await c.run(`create view received as select json_extract_string(body, '$.id') as k, received_at::timestamp as t from read_json('${dir}/received.ndjson', format='newline_delimited', columns={body:'varchar', received_at:'varchar'})`);
await c.run(`create view processed as select event_id as k, ts::timestamp as t from read_json('${dir}/processed.ndjson', format='newline_delimited', columns={event_id:'varchar', ts:'varchar'})`);
await c.run(`create table s as select k, count(*) n, min(t) f, max(t) l from sent group by k`);
await c.run(`create table r as select k, count(*) n, min(t) f, max(t) l from received group by k`);
await c.run(`create table p as select k, count(*) n, min(t) f, max(t) l from processed group by k`);
const latest = `(select max(x) from (select max(l) x from s union all select max(l) from r union all select max(l) from p))`;
const hop = (a, b) => `select
  (select count(*) from ${a} where k not in (select k from ${b}) and l <= ${latest} - interval 60 second) as lost,
  (select quantile_cont(epoch_ms(${b}.f) - epoch_ms(${a}.f), [0.5, 0.95, 0.99]) from ${a} join ${b} using (k)) as latency`;
const rows = {};
for (const [name, query] of [
  ['sent_received', hop('s', 'r')],
  ['received_processed', hop('r', 'p')],
  ['duplicated', `select (select count(*) from s where n > 1) + (select count(*) from r where n > 1) + (select count(*) from p where n > 1) as duplicated`],
  ['orphan', `select count(*) as orphan from (select k from r union select k from p) where k not in (select k from s)`],
]) {
  const result = await c.runAndReadAll(query);
  rows[name] = result.getRowObjectsJson()[0];
}
console.log(JSON.stringify(rows));
