"""A plain HF Trainer script, as its author wrote it, with no line for any tracker: trains a tiny
GPT-2 and writes what the Trainer logged (its log history) to the JSON file named by ``argv[1]``."""

import json
import sys
from pathlib import Path

from examples.tiny_gpt2 import trainer


def main() -> None:
    out = Path(sys.argv[1])
    hf = trainer(str(out.parent / "hf"), max_steps=6, logging_steps=2, eval_steps=3, save_steps=6)
    hf.train()
    out.write_text(json.dumps(hf.state.log_history))


if __name__ == "__main__":
    main()
