"""The tools of the agent kill -9 test (loaded by the CLI with --tools): ``act`` is a side
effect (not idempotent: an intent is committed before it starts) that appends its idempotency
key to the ledger file ``$SOPHON_TEST_LEDGER``; ``look`` is idempotent."""

import json
import os
import time

from sophon_dsl import current_call
from sophon_dsl.tools import tool


@tool(name="act", risk="low")
def act(n: int) -> int:
    with open(os.environ["SOPHON_TEST_LEDGER"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"key": current_call().key, "n": n}) + "\n")
    time.sleep(0.05)
    return n * 10


@tool(name="look", risk="low", idempotent=True)
def look(n: int) -> int:
    return n + 1
