#!/usr/bin/env python3
"""A handler that checks its key, does the work, then stores the key: one
copy at a time it looks idempotent; copies that arrive together all do the
work (the three-retry-layers incident). Fails concurrent-duplicates.

    python3 samples/handlers/check_after_work.py --db /tmp/after.db
"""
import sys

from webhook_handler import main

sys.exit(main("check-after-work"))
