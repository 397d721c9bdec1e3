#!/usr/bin/env python3
"""A handler that checks its key, does the work, then stores the key: one
copy at a time it looks idempotent; copies that arrive together all do the
work (the three-retry-layers incident). Fails concurrent-duplicates.

    python3 samples/handlers/check_after_work.py --db /tmp/after.db
"""
import sys

from webhook_handler import main

# Work that takes a quarter of a second, as a payment call might: copies that
# arrive within it all find the key absent (a flag given later overrides it).
sys.argv[1:1] = ["--work-seconds", "0.25"]
sys.exit(main("check-after-work"))
