#!/usr/bin/env python3
"""The correct handler whose keys live 5 minutes: a provider's retry after 6
minutes is processed again (the 5-minute-TTL incident). Fails late-retry.

    python3 samples/handlers/short_ttl.py --db /tmp/ttl.db --trust-clock-header X-Idem-Now
"""
import sys

from webhook_handler import main

sys.argv[1:1] = ["--ttl", "300"]
sys.exit(main("short-ttl"))
