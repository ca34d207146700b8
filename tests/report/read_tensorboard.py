#!/usr/bin/env python3
"""Reads a TensorBoard log directory with TensorBoard's own reader and prints its scalars as JSON.

  read_tensorboard.py DIR

Output: {"tag": [[step, value], ...], ...} from
tensorboard.backend.event_processing.event_accumulator.EventAccumulator (every event kept).
Exit status 77 (and a message) when the tensorboard package is not installed: the tests skip.
"""
import json
import sys

try:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
except ImportError as e:
    print(f"tensorboard is not installed ({e}); pip install tensorboard", file=sys.stderr)
    sys.exit(77)

accumulator = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
accumulator.Reload()
print(json.dumps({tag: [[e.step, e.value] for e in accumulator.Scalars(tag)]
                  for tag in accumulator.Tags()["scalars"]}))
