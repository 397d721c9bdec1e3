#!/usr/bin/env bash
# A short tour of what idem finds in the sample captures (make demo).
set -uo pipefail
IDEM=${1:-build/idem}
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '\n\033[1m== %s\033[0m\n$ %s\n' "$1" "$2"; }
verdicts() { jq -r '[._idem.verify.valid, ._idem.verify.scheme, (._idem.verify.key // "-"), ._idem.verify.reason] | @tsv' | column -t -s $'\t'; }

step "Stripe captures: a rotated secret, a forged delivery, a replay, a tampered amount" \
     "idem verify --scheme stripe --secret-env old=STRIPE_OLD --secret-env current=STRIPE_NOW samples/captures/stripe.ndjson"
STRIPE_OLD=whsec_demo_rotated_out STRIPE_NOW=whsec_demo_stripe_secret \
    "$IDEM" verify --scheme stripe --secret-env old=STRIPE_OLD --secret-env current=STRIPE_NOW \
    samples/captures/stripe.ndjson | verdicts
echo "exit code: ${PIPESTATUS[0]} (1: some deliveries are not genuine)"

step "Why does a genuine delivery fail? --explain tries what breaks them on the way" \
     "jq -c '.body |= (fromjson | tojson)' (a proxy compacts the JSON) | idem verify --explain ...; and the captures above"
{ head -1 samples/captures/stripe.ndjson | jq -c '.body |= (fromjson | tojson)'; tail -n +2 samples/captures/stripe.ndjson; } |
    STRIPE_OLD=whsec_demo_rotated_out STRIPE_NOW=whsec_demo_stripe_secret \
    "$IDEM" verify --scheme stripe --secret-env old=STRIPE_OLD --secret-env current=STRIPE_NOW --explain -q |
    jq -r 'select(._idem.verify.valid | not) | [.id, ._idem.verify.diagnosis.kind, ._idem.verify.diagnosis.detail] | @tsv' |
    column -t -s $'\t'

step "GitHub captures, remembering delivery ids: the UI's 'Redeliver' shows up as a replay" \
     "idem verify --secret \$GH --nonce --store $work/idem.db samples/captures/github.ndjson"
"$IDEM" verify --secret gh-demo-secret --nonce --store "$work/idem.db" samples/captures/github.ndjson | verdicts

step "Several providers at once: the scheme is told from the headers" \
     "idem verify --secret-file secrets.txt --now 2026-11-30T08:01:00Z samples/captures/mixed.ndjson"
printf 'gh-demo-secret\nwhsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n8f742231b10e8888abcd99yyyzzz85a5\nshopify-demo-secret\n' > "$work/secrets.txt"
"$IDEM" verify --secret-file "$work/secrets.txt" --now 2026-11-30T08:01:00Z samples/captures/mixed.ndjson | verdicts

step "Bad input loses nothing: lines that are not records go to --reject, byte for byte" \
     "idem verify --secret \$GH --reject rejects.ndjson --summary json samples/captures/bad-lines.ndjson > verified.ndjson"
"$IDEM" verify --secret gh-demo-secret --ignore-timestamp --reject "$work/rejects.ndjson" --summary json \
    samples/captures/bad-lines.ndjson > "$work/verified.ndjson"
echo "verified: $(wc -l < "$work/verified.ndjson") lines, rejects: $(wc -l < "$work/rejects.ndjson") lines"

step "A browser's HAR export is read as envelopes" \
     "idem verify --input-format har --secret \$GH --ignore-timestamp samples/captures/deliveries.har"
"$IDEM" verify --input-format har --secret gh-demo-secret --ignore-timestamp samples/captures/deliveries.har | verdicts

step "sign and verify round-trip: fixtures for your own tests" \
     "idem sign --scheme standard --secret \$WHSEC samples/captures/mixed.ndjson | idem verify --scheme standard --secret \$WHSEC"
"$IDEM" sign --scheme standard --secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw -q samples/captures/mixed.ndjson |
    "$IDEM" verify --scheme standard --secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | verdicts
step "A provider without a built-in scheme: described in a file (providers/paddle.yaml), told by auto" \
     "idem sign --provider-file providers --scheme paddle ... | idem verify --provider-file providers"
head -3 samples/events/orders.ndjson |
    "$IDEM" sign --provider-file providers --scheme paddle --secret pdl_ntfset_demo -q |
    "$IDEM" verify --provider-file providers --secret pdl_ntfset_demo | verdicts

step "Each event once: Stripe redeliveries and retries with a new request id are the same event" \
     "idem dedup --key data.object.id,type --dups dups.ndjson samples/events/stripe-events.ndjson"
"$IDEM" dedup --key data.object.id,type --store "$work/idem.db" --dups "$work/dups.ndjson" \
    samples/events/stripe-events.ndjson | jq -c '{id, type}'
echo "duplicates:"
jq -c '{id, duplicate_of: ._idem.dedup.duplicate_of, seen_count: ._idem.dedup.seen_count}' "$work/dups.ndjson"

step "A second run remembers: every event in it was seen before" \
     "idem dedup --key data.object.id,type --count samples/events/stripe-events.ndjson"
"$IDEM" dedup --key data.object.id,type --store "$work/idem.db" --count samples/events/stripe-events.ndjson

step "Back in order: CI events per pipeline, a missing approval reported as a gap, a late redelivery set aside" \
     "idem reorder --seq seq --partition pipeline --start 1 --gap-timeout 30s --time-field at --late late.ndjson samples/events/ci-pipeline.ndjson"
"$IDEM" reorder --seq seq --partition pipeline --start 1 --gap-timeout 30s --time-field at --store "$work/idem.db" \
    --late "$work/late.ndjson" samples/events/ci-pipeline.ndjson |
    jq -r 'if ._idem.gap then "GAP \(._idem.gap.partition) \(._idem.gap.from)-\(._idem.gap.to)" else "\(.pipeline) \(.seq) \(.event)" end'
echo "late:"
jq -c '{pipeline, seq, late: ._idem.late.reason, expected: ._idem.late.expected}' "$work/late.ndjson"

step "Five alerts, one notification: the seed's merge rules, a critical alert let through, a late reading kept aside" \
     "idem merge --rules samples/merge.yaml --time-field ts --max-lateness 30s --bypass priority=critical --late late.ndjson samples/events/alerts-metrics.ndjson"
"$IDEM" merge --rules samples/merge.yaml --time-field ts --max-lateness 30s --bypass priority=critical \
    --late "$work/merge-late.ndjson" samples/events/alerts-metrics.ndjson |
    jq -c 'if ._idem.merge.bypassed then {bypassed: .msg} elif ._idem.merge.id then {rule: ._idem.merge.rule, group: ._idem.merge.group, count: ._idem.merge.count} + (if .merged then {messages: [.merged[].msg]} else {value} end) else {passed: .type} end'
echo "late:"
jq -c '{device_id, ts, late: ._idem.merge.late, watermark: ._idem.merge.watermark}' "$work/merge-late.ndjson"

step "Which event broke the order's life? An illegal refund, a lost update, a missing version, a stuck order" \
     "idem states --entity order_id --state status --event op --version-field version --max-lateness 30s --time-field ts --stuck-after 30m --machine samples/orders-machine.yaml samples/events/orders.ndjson"
"$IDEM" states --entity order_id --state status --event op --version-field version --max-lateness 30s \
    --time-field ts --stuck-after 30m --machine samples/orders-machine.yaml --store "$work/idem.db" --fail-on none \
    samples/events/orders.ndjson | jq -c '._idem.states | select(.verdict != "ok") | {entity, verdict, why}'

step "Where were events lost? Sent by the provider, received by listen, processed by the app" \
     "idem reconcile --stage sent=samples/flow/stripe-events.json --stage received=samples/flow/capture.ndjson --stage processed=samples/flow/app.ndjson --key sent=id --key received=body.id --key processed=event_id ... --missing lost.ndjson"
"$IDEM" reconcile --stage sent=samples/flow/stripe-events.json --stage received=samples/flow/capture.ndjson \
    --stage processed=samples/flow/app.ndjson --key sent=id --key received=body.id --key processed=event_id \
    --time sent=created --time processed=ts --sla 10m --grace 5m --examples 2 -q \
    --missing "$work/lost.ndjson" --metrics "$work/reconcile.prom" | sed -n '5,12p'
echo "to send again: $(wc -l < "$work/lost.ndjson") events in lost.ndjson"
echo "for node_exporter's textfile collector (--metrics reconcile.prom):"
grep -E '^idem_run_part_records.*count="lost"' "$work/reconcile.prom"

step "Why seven identical tickets? Three retry layers, a new key each time" \
     "idem audit --key idempotency_key --fingerprint user_id,fault_type --time-field ts --source-field agent samples/incidents/agent-retries.ndjson"
"$IDEM" audit --key idempotency_key --fingerprint user_id,fault_type --time-field ts --source-field agent -q \
    samples/incidents/agent-retries.ndjson

step "Whose retry was it? The provider's schedule, a fan-out, a replay, a retry layer" \
     "idem audit --key body.id samples/incidents/webhook-deliveries.ndjson"
"$IDEM" audit --key body.id -q samples/incidents/webhook-deliveries.ndjson | grep -E '^#|provider-retry|fan-out|replayed'
"$IDEM" audit --key idempotency_key --time-field ts --attempt-field attempt.agent --attempt-field attempt.tool \
    --attempt-field attempt.http --format json -q samples/incidents/layered-retries.ndjson |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["groups"][0]["evidence"]["layered-retry"]["summary"])'

step "Which key would have caught the seven tickets? The business fields, without swallowing others" \
     "idem audit --key idempotency_key --what-if key=user_id,fault_type --what-if key=ticket.priority ..."
"$IDEM" audit --key idempotency_key --time-field ts --what-if key=user_id,fault_type --what-if key=ticket.priority \
    -q samples/incidents/agent-retries.ndjson | sed -n '/what if/,$p'

step "A retry that came after the dedup key expired" \
     "idem audit --key key --time-field ts --source-field worker --ttl 5m samples/incidents/ttl-expired.ndjson"
"$IDEM" audit --key key --time-field ts --source-field worker --ttl 5m -q samples/incidents/ttl-expired.ndjson

step "Which TTL would have caught it?" \
     "idem audit --key key --time-field ts --what-if ttl=5m,10m,1h --suggest samples/incidents/ttl-expired.ndjson"
"$IDEM" audit --key key --time-field ts --source-field worker --ttl 5m --what-if ttl=5m,10m,1h --suggest -q \
    samples/incidents/ttl-expired.ndjson | sed -n '/what if/,/delays of/p'

step "Capture, then re-send safely: a target that fails a third of the time and asks to be called back" \
     "idem listen --port 0 --fail-rate 33% --fail-status 503 --retry-after 1s & idem replay --to \$URL --key id ..."
"$IDEM" listen --port 0 --fail-rate 33% --fail-status 503 --retry-after 1s --seed 7 -o "$work/target.ndjson" \
    2> "$work/listen.err" &
listener=$!
for _ in $(seq 100); do
    port=$(sed -n 's/.*http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$work/listen.err" | head -1)
    [ -n "$port" ] && break
    sleep 0.05
done
"$IDEM" replay --to "http://127.0.0.1:$port/hooks" --key id --store "$work/idem.db" --backoff 100ms..2s -q \
    samples/events/stripe-events.ndjson | jq -c '{key, outcome} + (if .reason then {reason} else {attempts, status} end)'
echo "a rerun sends nothing:"
"$IDEM" replay --to "http://127.0.0.1:$port/hooks" --key id --store "$work/idem.db" \
    samples/events/stripe-events.ndjson > /dev/null
kill -TERM "$listener"
wait "$listener" 2> /dev/null
echo "the target captured $(wc -l < "$work/target.ndjson") requests, $(jq -s '[.[] | select(._idem.listen.status == 200)] | length' "$work/target.ndjson") answered 200"
echo "why did one key arrive three times? the capture, with replay's ledger beside it:"
"$IDEM" audit --key headers.Idempotency-Key --replay-ledger "$work/idem.db" \
    --replay-scope "replay:http://127.0.0.1:$port/hooks" "$work/target.ndjson" | sed -n '5,9p'

step "Before production does: probe three handlers, one correct, one that checks its key after the work, one whose keys live 5 minutes" \
     "idem probe --to \$URL --scheme stripe --secret ... --clock-header X-Idem-Now --effects-sqlite app.db --effects-query ..."
for handler in correct check_after_work short_ttl; do
    python3 samples/handlers/$handler.py --db "$work/$handler.db" --secret whsec_demo \
        --trust-clock-header X-Idem-Now > "$work/$handler.out" 2>&1 &
    handler_pid=$!
    for _ in $(seq 100); do
        url=$(sed -n 's/listening on \(http[^ ]*\).*/\1/p' "$work/$handler.out")
        [ -n "$url" ] && break
        sleep 0.05
    done
    echo "samples/handlers/$handler.py:"
    "$IDEM" probe --to "$url" --scheme stripe --secret whsec_demo --clock-header X-Idem-Now --speed 3600 \
        --fail-first 'X-Inject-Fault: 1' --schedule fixed:1s -q \
        --effects-sqlite "$work/$handler.db" --effects-query 'SELECT count(*) FROM effects WHERE key = :key' |
        grep -E 'fail|warn|passed' || true
    kill -TERM "$handler_pid"
    wait "$handler_pid" 2> /dev/null || true
done

echo
echo "Next: idem --help, idem COMMAND --help (verify, dedup, reorder, merge, states, reconcile, audit, listen, replay, probe), and docs/."
