#!/usr/bin/env python3
"""The reference handler that is idempotent: the key is claimed before the
work, the work and the key's completion commit together, copies in progress
get 409, completed ones the stored response, another payload 422.

    python3 samples/handlers/correct.py --db /tmp/correct.db
"""
import sys

from webhook_handler import main

sys.exit(main("correct"))
