// What an analyst runs instead of idem, for bench/run_scale.sh: DuckDB over
// the NDJSON file, reading only the key.
//   node bench/scale_duckdb.mjs count FILE    distinct keys (dedup, counting only)
//   node bench/scale_duckdb.mjs group FILE    keys seen more than once (audit's grouping)
import { DuckDBInstance } from '@duckdb/node-api';

const [kind, file] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const input = `read_json('${file}', format='newline_delimited', columns={key:'varchar'})`;
const query = kind === 'count'
  ? `select count(distinct key) as distinct_keys, count(*) as records from ${input}`
  : `select count(*) as repeated_keys, sum(n) as copies from (select key, count(*) n from ${input} group by key having count(*) > 1)`;
const result = await c.runAndReadAll(query);
console.log(JSON.stringify(result.getRowObjectsJson()[0]));
