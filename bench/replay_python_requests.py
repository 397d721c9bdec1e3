"""What users write instead of `idem replay`: a requests.Session loop that
POSTs each event with an Idempotency-Key header and retries 5xx a few times.
It keeps no ledger: a rerun sends everything again."""
import json
import sys
import time

import requests


def main():
    url, path, latency_path = sys.argv[1], sys.argv[2], sys.argv[3]
    session = requests.Session()
    latencies = []
    completed = 0
    with open(path, "rb") as events:
        for line in events:
            key = json.loads(line)["id"]
            for attempt in range(5):
                started = time.perf_counter()
                response = session.post(url, data=line, headers={"Content-Type": "application/json",
                                                                  "Idempotency-Key": key})
                latencies.append(time.perf_counter() - started)
                if response.status_code < 500:
                    break
                time.sleep(min(2 ** attempt, 30))
            completed += response.ok
    with open(latency_path, "w") as out:
        out.writelines(f"{seconds * 1000:.3f}\n" for seconds in latencies)
    print(json.dumps({"completed": completed}))


if __name__ == "__main__":
    main()
