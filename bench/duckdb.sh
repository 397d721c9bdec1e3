# Sourced by the benchmarks that put DuckDB beside idem (issue: scale).
# DuckDB comes from npm (@duckdb/node-api, its Linux binary as an npm
# package) into bench/out/duckdb, only for benchmarks: never a project
# dependency, never needed by `make test`. After `ensure_duckdb`, DUCKDB is
# "yes" when it can run, and DUCKDB_DIR holds the package; otherwise the
# reason was said and the benchmark goes on without it.
DUCKDB_DIR=bench/out/duckdb
DUCKDB=no
ensure_duckdb() {
    if [ ! -d "$DUCKDB_DIR/node_modules/@duckdb/node-api" ] && command -v npm > /dev/null; then
        mkdir -p "$DUCKDB_DIR"
        (cd "$DUCKDB_DIR" && npm install --silent --no-audit --no-fund @duckdb/node-api > /dev/null 2>&1) || true
    fi
    if [ -d "$DUCKDB_DIR/node_modules/@duckdb/node-api" ] && command -v node > /dev/null; then
        DUCKDB=yes
        # The scripts resolve @duckdb from the folder they run in.
        cp bench/*_duckdb.mjs bench/duckdb_keys.mjs "$DUCKDB_DIR/" 2> /dev/null || true
    else
        echo "DuckDB could not be installed from npm into $DUCKDB_DIR: its rows are left out"
    fi
}
