// What an analyst runs instead of idem over an NDJSON log: DuckDB reading
// only the columns the key needs.
//   node duckdb_keys.mjs count    FILE COLUMNS KEY   distinct keys and records (dedup, counting only)
//   node duckdb_keys.mjs repeated FILE COLUMNS KEY   the keys seen more than once, one per line (audit's grouping)
//   node duckdb_keys.mjs groups   FILE COLUMNS KEY   how many keys repeat, and their copies
// COLUMNS is read_json's columns={...}, KEY an SQL expression over them:
//   "{key:'varchar'}" key
//   "{type:'varchar', data:'json'}" "json_extract_string(data, '$.object.id') || '|' || type"
import { DuckDBInstance } from '@duckdb/node-api';

const [kind, file, columns, key] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const input = `(select ${key} as k from read_json('${file}', format='newline_delimited', columns=${columns}))`;
if (kind === 'count') {
  const result = await c.runAndReadAll(`select count(distinct k) as distinct_keys, count(*) as records from ${input}`);
  console.log(JSON.stringify(result.getRowObjectsJson()[0]));
} else if (kind === 'repeated') {
  const result = await c.runAndReadAll(`select k from ${input} group by k having count(*) > 1`);
  process.stdout.write(result.getRows().map((row) => row[0]).join('\n') + '\n');
} else {
  const result = await c.runAndReadAll(`select count(*) as repeated_keys, sum(n) as copies from (select k, count(*) n from ${input} group by k having count(*) > 1)`);
  console.log(JSON.stringify(result.getRowObjectsJson()[0]));
}
