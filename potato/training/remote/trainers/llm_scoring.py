"""Label scoring for ``hf-llm-classification`` (a mixin of hf_llm.Trainer): padded rows of
(prompt, answer) token ids, each label's answer log-likelihood, and predictions from them.

Prediction never generates: every label's answer (EOS included) is scored given the prompt and
the softmax over the labels taken, so the answer is always one of the scheme's labels and the
confidences sum to 1. Scoring pads on the left (with explicit position ids) so that every
answer ends the row and only the last few positions' logits are computed.
torch is imported inside the methods: importing this module never imports it.
"""

import math


class Scoring:
    """Needs from the trainer: tokenizer, device, model, labels, answers, longest_answer,
    keep_kw, p (batch_size), ctx, _autocast() and prompt_ids()."""

    def _rows(self, pairs, left):
        """input_ids, attention_mask, labels and position ids for (prompt, answer) pairs."""
        import torch

        width = max(len(a) + len(b) for a, b in pairs)
        pad = self.tokenizer.pad_token_id
        ids, mask, labels, pos = [], [], [], []
        for prompt, ans in pairs:
            n = len(prompt) + len(ans)
            fill = width - n
            if left:
                ids.append([pad] * fill + prompt + ans)
                mask.append([0] * fill + [1] * n)
                labels.append([-100] * (fill + len(prompt)) + ans)
                pos.append([0] * fill + list(range(n)))
            else:
                ids.append(prompt + ans + [pad] * fill)
                mask.append([1] * n + [0] * fill)
                labels.append([-100] * len(prompt) + ans + [-100] * fill)
                pos.append(list(range(n)) + [0] * fill)
        as_t = lambda rows: torch.tensor(rows, dtype=torch.long, device=self.device)  # noqa
        return as_t(ids), as_t(mask), as_t(labels), as_t(pos)

    def label_probabilities(self, texts):
        """For each text, the softmax over the labels of their answers' log-likelihoods (a
        list in the scheme's label order, summing to 1)."""
        return [softmax(row) for row in self.label_scores(texts)]

    def label_scores(self, texts):
        """For each text, each label's answer log-likelihood (sum over its tokens, EOS too)."""
        import torch

        self.model.eval()
        prompts = [self.prompt_ids(t) for t in texts]
        pairs = [(i, k) for i in range(len(texts)) for k in range(len(self.labels))]
        pairs.sort(key=lambda ik: len(prompts[ik[0]]) + len(self.answers[ik[1]]))
        scores = [[0.0] * len(self.labels) for _ in texts]
        size = self.p["batch_size"] * 2
        for start in range(0, len(pairs), size):
            self.ctx.check_cancelled()
            chunk = pairs[start:start + size]
            ids, mask, labels, pos = self._rows([(prompts[i], self.answers[k])
                                                 for i, k in chunk], left=True)
            # the logits that predict the answers' tokens (a batch of short rows is narrower)
            keep = min(self.longest_answer + 1, ids.shape[1])
            extra = {self.keep_kw: keep} if self.keep_kw else {}
            with torch.no_grad(), self._autocast():
                logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos,
                                    use_cache=False, **extra).logits
            logits = logits[:, -keep:-1].float()
            targets = labels[:, -(keep - 1):]
            logp = torch.log_softmax(logits, dim=-1)
            picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            row_scores = (picked * (targets != -100)).sum(dim=-1).tolist()
            for (i, k), s in zip(chunk, row_scores):
                scores[i][k] = s
        return scores

    def predict(self, scheme, texts):
        return [answer[:2] for answer in self.predict_ranked(scheme, texts)]

    def predict_ranked(self, scheme, texts):
        """As ``predict``, with each label's probability (the label scores' softmax) for
        active learning."""
        out = []
        for probs in self.label_probabilities(texts):
            k = max(range(len(probs)), key=probs.__getitem__)
            out.append((self.labels[k], probs[k],
                        {"probabilities": dict(zip(map(str, self.labels), probs))}))
        return out


def softmax(row):
    top = max(row)
    exps = [math.exp(s - top) for s in row]
    total = sum(exps)
    return [e / total for e in exps]
