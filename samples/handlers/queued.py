#!/usr/bin/env python3
"""A handler that answers 200 at once and leaves the work to a queue: the
worker looks the key up when it gets to the delivery, two seconds later,
and stores it with the work. Copies queued before the first is done all
work, and every side effect shows only after the answer, so a probe that
reads the effects as soon as it is answered sees none, or one where there
will be two. docs/probe.md, "Handlers that act after answering".

    python3 samples/handlers/queued.py --db /tmp/queued.db
"""
import sys

from webhook_handler import main

sys.argv[1:1] = ["--work-seconds", "0.25"]
sys.exit(main("queued"))
