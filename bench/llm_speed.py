"""hf-llm-classification against what a user would otherwise write: ``transformers.Trainer``.

THE MODEL IS RANDOMLY INITIALISED. No pretrained causal LM can be downloaded here, so the bench
builds one: a small Llama (4 layers, hidden 128, 4 heads, initializer_range 0.3 as in
tests/training/remote/trainers/test_hf_llm.py, seed 0) over a word-level tokenizer
trained with the ``tokenizers`` library on the SST-2 texts of bench/data (BOS and EOS, no pad
token, like most causal LMs), saved to a temporary directory that both sides load. Its held-out
accuracy measures only that both sides learn the same thing from the same work, not the quality
of an LLM classifier.

Both sides, in this one process, alternating (ours then Trainer, Trainer then ours, ...;
medians of wall time, each side's CPU time printed too as a check on the noise): the same model,
the same training items (the train split of a product bundle built from
bench/data/sst2-2000-labelled.jsonl: 70 % of the labelled items), epochs, batch size, learning
rate, LoRA config (peft, r 16, alpha 32, dropout 0.05 on q_proj and v_proj: the trainer's
defaults for a Llama) and the same prompt (llm_prompt.render with the trainer's default
template) followed by " <label>" and EOS, the loss on the answer tokens only. Each side's time
runs from loading the tokenizer and model to having predicted the held-out SST-2 dev sentences
(bench/data/sst2-dev-872.jsonl) by scoring each label's answer log-likelihood; the training part
of it (loading included) is printed as well. Neither side saves the model.

Ours runs as the product does, through the worker's Context: it also scores the val split after
every epoch (work Trainer's side does not do) and predicts through Trainer.predict (label
scoring, llm_scoring.py) 256 texts per call as the worker asks. Trainer's side is what a user
would write: each item tokenized once (prompt ids, then the answer's ids and EOS; labels -100 on
the prompt), a plain padding collator (pad id, mask 0, labels -100), the peft model handed to
``Trainer(...).train()`` with TrainingArguments at their defaults except what must match:
num_train_epochs, per_device_train_batch_size, learning_rate, seed (0, ours; Trainer's default
is 42), and use_cpu on the CPU. Kept defaults include: fused/torch AdamW (Trainer's default
optim), weight decay 0, linear decay, no warmup, max_grad_norm 1.0 (ours clips at 1.0 too),
random sampling (no length grouping: ours groups by length), fp32, report_to none. Ours runs
with bf16=false by default here (fp32 like Trainer's default; --bf16 auto lets it use bfloat16
on a GPU that supports it, which Trainer's defaults would not). Its prediction
is a plain loop a user would write: per_device_eval_batch_size (8, Trainer's default) texts at a
time, both labels' rows padded on the right, the full logits, the answer tokens' log-probs
summed, the larger sum wins.

Before the timed runs, one untimed tiny run of each side pays the process's one-time costs.

Target: our median wall time <= 0.75 of Trainer's, at >= its held-out accuracy.

    python3 bench/llm_speed.py --repeat 3     # 1,000 labels (679 train), 5 epochs, lr 1e-2
    python3 bench/llm_speed.py --items 300 --epochs 1 --dev 200   # a quick check
"""

import argparse
import io
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.hf_speed import LABELS, SCHEMAS, accuracy, make_bundle, rows  # noqa: E402
from potato.training.remote import llm_prompt  # noqa: E402
from potato.training.remote import protocol as events  # noqa: E402
from potato.training.remote.trainers import REGISTRY, resolve_params  # noqa: E402

TARGET = 0.75
TRAINER = "hf-llm-classification"
SCHEME = "sentiment"


def build_model(d, layers=4, hidden=128, init=0.3):
    """A random-initialised Llama and a word-level tokenizer over the SST-2 texts, saved to
    ``d`` (no downloads)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers

    texts = [r["text"] for r in rows("sst2-2000-labelled.jsonl", 2000)]
    texts += [r["text"] for r in rows("sst2-dev-872.jsonl", 872)]
    texts += [llm_prompt.DEFAULT_TEMPLATE, " ".join(LABELS), SCHEME]
    tk = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.train_from_iterator(texts, trainers.WordLevelTrainer(
        vocab_size=8000, special_tokens=["<unk>", "<s>", "</s>"]))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[
        ("<s>", tk.token_to_id("<s>"))])
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>",
                                               bos_token="<s>", eos_token="</s>")
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
        max_position_embeddings=256, initializer_range=init, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def run_ours(tmp, b, params, dev, device):
    from potato.training.remote.trainers.hf_llm import Trainer
    from potato.training.remote.worker import Context

    spec = {"run_id": "bench", "trainer": TRAINER, "schemas": SCHEMAS, "params": params,
            "device": device}
    ctx = Context(spec, tmp, events.Emitter(io.StringIO()))
    ctx.bundle = b
    os.makedirs(ctx.artifacts, exist_ok=True)
    t0 = time.perf_counter()
    t = Trainer(ctx)
    t._save = lambda: None  # Trainer's side does not save either
    t.train()
    trained = time.perf_counter() - t0
    texts = [r["text"] for r in dev]
    predicted = []
    for start in range(0, len(texts), 256):  # as the worker asks for predictions
        predicted += [lab for lab, _ in t.predict(SCHEME, texts[start:start + 256])]
    return time.perf_counter() - t0, trained, accuracy(predicted, dev)


def run_trainer(tmp, b, params, dev, device):
    """What a user would write with transformers.Trainer, at its defaults."""
    import torch
    from peft import LoraConfig, TaskType, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    t0 = time.perf_counter()
    tok = AutoTokenizer.from_pretrained(params["model"])
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(params["model"], dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(
        task_type=TaskType.CAUSAL_LM, r=params["lora_r"], lora_alpha=params["lora_alpha"],
        lora_dropout=params["lora_dropout"], target_modules=["q_proj", "v_proj"]))

    def prompt(text):
        return llm_prompt.render(llm_prompt.DEFAULT_TEMPLATE, SCHEME, LABELS, text)

    answers = [tok(" " + lab, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
               for lab in LABELS]

    def example(text, k):
        ids = tok(prompt(text))["input_ids"][:params["max_length"] - len(answers[k])]
        return {"input_ids": ids + answers[k], "labels": [-100] * len(ids) + answers[k]}

    def collate(batch):
        width = max(len(e["input_ids"]) for e in batch)
        pad = lambda seq, value: seq + [value] * (width - len(seq))  # noqa: E731
        return {"input_ids": torch.tensor([pad(e["input_ids"], tok.pad_token_id)
                                           for e in batch]),
                "attention_mask": torch.tensor([pad([1] * len(e["input_ids"]), 0)
                                                for e in batch]),
                "labels": torch.tensor([pad(e["labels"], -100) for e in batch])}

    train = [example(text, LABELS.index(lab)) for text, lab in b.labelled("train", SCHEME)]
    args = TrainingArguments(output_dir=os.path.join(tmp, "hf-trainer"),
                             num_train_epochs=params["epochs"],
                             per_device_train_batch_size=params["batch_size"],
                             learning_rate=params["learning_rate"], seed=params["seed"],
                             use_cpu=device == "cpu")
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=collate)
    trainer.train()
    trained = time.perf_counter() - t0

    # prediction: each label's answer log-likelihood given the prompt, the larger one wins
    model.eval()
    texts = [r["text"] for r in dev]
    predicted = []
    for start in range(0, len(texts), args.per_device_eval_batch_size):
        chunk = texts[start:start + args.per_device_eval_batch_size]
        batch = collate([example(t, k) for t in chunk for k in range(len(LABELS))])
        batch = {k: v.to(trainer.args.device) for k, v in batch.items()}
        with torch.no_grad():
            logits = model(input_ids=batch["input_ids"],
                           attention_mask=batch["attention_mask"]).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        targets = batch["labels"][:, 1:]
        picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        scores = (picked * (targets != -100)).sum(-1).view(len(chunk), len(LABELS))
        predicted += [LABELS[k] for k in scores.argmax(-1).tolist()]
    return time.perf_counter() - t0, trained, accuracy(predicted, dev)


def params_for(args, model_dir):
    return resolve_params(REGISTRY[TRAINER], {
        "model": model_dir, "epochs": args.epochs, "learning_rate": args.learning_rate,
        "batch_size": args.batch_size, "max_length": 128, "processes": 1, "bf16": args.bf16})


def compare(args, device="cpu", out=print):
    """Alternating runs of both sides; returns (ratio, our accuracy, Trainer's accuracy)."""
    dev = rows("sst2-dev-872.jsonl", args.dev)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or build_model(os.path.join(tmp, "random-llama"), args.layers,
                                              args.hidden, args.init)
        params = params_for(args, model_dir)
        b = make_bundle(tmp, rows("sst2-2000-labelled.jsonl", args.items))
        n_train = len(b.labelled("train", SCHEME))
        if args.warmup:  # one-time costs (first kernels, lazy imports) for neither side
            small = dict(params, epochs=1)
            wb = make_bundle(os.path.join(tmp, "warmup"), rows("sst2-2000-labelled.jsonl", 64))
            run_ours(os.path.join(tmp, "warmup"), wb, small, dev[:16], device)
            run_trainer(os.path.join(tmp, "warmup"), wb, small, dev[:16], device)
        for n in range(args.repeat):  # A B, B A, A B ...: drift in the load hits both
            sides = [(ours, run_ours), (theirs, run_trainer)]
            for results, run in (sides if n % 2 == 0 else sides[::-1]):
                cpu = time.process_time()
                seconds, trained, acc = run(tmp, b, params, dev, device)
                results.append((seconds, acc, time.process_time() - cpu, trained))
            out("  pair %d (%s first): ours %.1f s (training %.1f s, CPU %.1f s, accuracy "
                "%.4f), Trainer %.1f s (training %.1f s, CPU %.1f s, accuracy %.4f)"
                % (n + 1, "ours" if n % 2 == 0 else "Trainer", ours[-1][0], ours[-1][3],
                   ours[-1][2], ours[-1][1], theirs[-1][0], theirs[-1][3], theirs[-1][2],
                   theirs[-1][1]))
    med = lambda rs, i: statistics.median(r[i] for r in rs)  # noqa: E731
    a, t = med(ours, 0), med(theirs, 0)
    acc_a, acc_t = med(ours, 1), med(theirs, 1)
    meets = a / t <= TARGET and acc_a >= acc_t
    out("hf-llm-classification %.1f s, transformers.Trainer %.1f s (%s; medians of %d, "
        "alternating; %s; %d labelled items -> %d train, %d epochs, batch %d, learning rate %g, "
        "max_length 128, LoRA r %d alpha %d dropout %g on q_proj,v_proj): ratio %.3f (target "
        "<= %.2f); held-out accuracy on %d SST-2 dev sentences: ours %.4f, Trainer %.4f "
        "(target: ours >= Trainer's): %s"
        % (a, t, device, args.repeat,
           "model %s" % args.model if args.model else
           "RANDOM-INITIALISED Llama, %d layers, hidden %d, word-level tokenizer: accuracy "
           "shows only that both sides learn alike, not LLM quality" % (args.layers, args.hidden),
           args.items, n_train, args.epochs, args.batch_size, args.learning_rate,
           params["lora_r"], params["lora_alpha"], params["lora_dropout"], a / t, TARGET,
           len(dev), acc_a, acc_t, "meets" if meets else "MISSES"))
    out("training alone (loading included; ours also scores val each epoch): ours %.1f s, "
        "Trainer %.1f s: ratio %.3f; CPU time (this process, all threads) ratio %.3f"
        % (med(ours, 3), med(theirs, 3), med(ours, 3) / med(theirs, 3),
           med(ours, 2) / med(theirs, 2)))
    out("Trainer defaults changed: num_train_epochs, per_device_train_batch_size, "
        "learning_rate, seed (0; default 42)%s; everything else at TrainingArguments' defaults"
        % (", use_cpu" if device == "cpu" else ""))
    return a / t, acc_a, acc_t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=1000, help="labelled items (bundle 70/15/15)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8, help="the trainer's default: 8")
    p.add_argument("--learning-rate", type=float, default=1e-2)
    p.add_argument("--dev", type=int, default=872, help="held-out SST-2 dev sentences")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, or cuda on a GPU machine")
    p.add_argument("--bf16", default="false", choices=["auto", "true", "false"],
                   help="ours (Trainer's side stays fp32, its default): false compares like "
                   "with like")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--init", type=float, default=0.3, help="the random Llama's "
                   "initializer_range")
    p.add_argument("--model", help="a local causal LM directory instead of the random Llama "
                   "(its LoRA targets must be q_proj,v_proj)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false",
                   help="skip the untimed tiny run of each side first")
    args = p.parse_args()
    compare(args, args.device)


if __name__ == "__main__":
    main()
