#!/usr/bin/env python3
"""correct.py whose keys live in the process: every check that sends a
delivery and its retry to one process passes, and a restart between them
(a deploy, a crash) forgets the key, so the retry acts again. Fails
retry-after-restart (probe --restart-cmd).

    python3 samples/handlers/memory_keys.py --db /tmp/memory.db --port 8000
"""
import sys

from webhook_handler import main

sys.argv[1:1] = ["--keys-in-memory"]
sys.exit(main("correct"))
