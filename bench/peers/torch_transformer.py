"""A peer on the same machine: PyTorch's nn.Transformer on run.py's training
works, so a t2tlite figure and a peer figure come from one machine and hour.

    python bench/peers/torch_transformer.py --work train_base [--bf16]
    python bench/peers/torch_transformer.py --work train_tiny [--bf16]

Runs in an environment of its own with torch installed (torch is not a
dependency of t2tlite); bench/README.md says how. The work is run.py's:
train_base = 6+6 layers, d_model 512, d_ff 2048, 8 heads, dropout 0.1,
shared vocabulary of 37,000 tied to the pre-softmax projection, sinusoidal
positions, label smoothing 0.1, Adam(0.9, 0.98, 1e-9); 64 pairs of 32 + 32
uniform random ids a step. train_tiny = 2+2 layers, d_model 256, d_ff 1024,
4 heads, vocab 8,000, 128 pairs. `--bf16` runs the forward pass under
torch.autocast(cpu, bfloat16) (float32 weights), PyTorch's mixed precision.
Figure: target tokens per second, median over --steps steps after --warmup.
"""
import argparse
import json
import math
import os
import platform
import resource
import statistics
import time

import torch

WORKS = {  # name: (layers, d_model, d_ff, heads, vocab, batch, length)
    "train_base": (6, 512, 2048, 8, 37000, 64, 32),
    "train_tiny": (2, 256, 1024, 4, 8000, 128, 32),
}


class Seq2Seq(torch.nn.Module):
  """nn.Transformer with shared, scaled embeddings and a tied output layer."""

  def __init__(self, layers, d_model, d_ff, heads, vocab, max_length=512):
    super().__init__()
    self.d_model = d_model
    self.embedding = torch.nn.Embedding(vocab, d_model)
    torch.nn.init.normal_(self.embedding.weight, std=d_model**-0.5)
    self.transformer = torch.nn.Transformer(
        d_model=d_model, nhead=heads, num_encoder_layers=layers,
        num_decoder_layers=layers, dim_feedforward=d_ff, dropout=0.1,
        batch_first=True)
    position = torch.arange(max_length).unsqueeze(1)
    rates = torch.exp(torch.arange(0, d_model, 2) * (-math.log(1e4) / d_model))
    signal = torch.zeros(max_length, d_model)
    signal[:, 0::2] = torch.sin(position * rates)
    signal[:, 1::2] = torch.cos(position * rates)
    self.register_buffer("signal", signal)
    self.dropout = torch.nn.Dropout(0.1)

  def embed(self, ids):
    """[batch, length] ids -> [batch, length, d_model]."""
    x = self.embedding(ids) * math.sqrt(self.d_model)
    return self.dropout(x + self.signal[:ids.shape[1]])

  def forward(self, inputs, targets_in):
    """Logits [batch, target length, vocab]."""
    mask = self.transformer.generate_square_subsequent_mask(
        targets_in.shape[1])
    hidden = self.transformer(self.embed(inputs), self.embed(targets_in),
                              tgt_mask=mask, tgt_is_causal=True)
    return hidden @ self.embedding.weight.t()


def measure(work, bf16, steps, warmup, seed):
  layers, d_model, d_ff, heads, vocab, batch, length = WORKS[work]
  torch.manual_seed(seed)
  model = Seq2Seq(layers, d_model, d_ff, heads, vocab).train()
  optimizer = torch.optim.Adam(model.parameters(), lr=1e-4,
                               betas=(0.9, 0.98), eps=1e-9)
  loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
  inputs = torch.randint(2, vocab, (batch, length))
  targets = torch.randint(2, vocab, (batch, length))
  targets_in = torch.cat([torch.zeros(batch, 1, dtype=torch.long),
                          targets[:, :-1]], dim=1)

  def step():
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
      logits = model(inputs, targets_in)
    loss = loss_fn(logits.float().reshape(-1, vocab), targets.reshape(-1))
    loss.backward()
    optimizer.step()
    return loss.item()

  losses = [step() for _ in range(warmup)]
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    losses.append(step())
    times.append(time.perf_counter() - start)
  median = statistics.median(times)
  return {
      "work": work, "implementation": "torch nn.Transformer",
      "mixed_precision": "bfloat16" if bf16 else "float32",
      "batch": batch, "source_length": length, "target_length": length,
      "vocab_size": vocab, "tokens_per_s": round(batch * length / median, 1),
      "step_s_median": round(median, 4), "step_s_min": round(min(times), 4),
      "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4),
      "params": sum(p.numel() for p in model.parameters()),
      "peak_rss_mb": round(
          resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
      "threads": torch.get_num_threads(), "steps": steps,
      "versions": {"torch": torch.__version__,
                   "python": platform.python_version()},
      "loadavg": list(os.getloadavg())}


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--work", choices=sorted(WORKS), default="train_base")
  parser.add_argument("--bf16", action="store_true")
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--warmup", type=int, default=2)
  parser.add_argument("--seed", type=int, default=1)
  args = parser.parse_args()
  if args.steps < 5:
    parser.error(f"--steps={args.steps}: at least 5 timed steps are needed")
  print(json.dumps(measure(args.work, args.bf16, args.steps, args.warmup,
                           args.seed)), flush=True)


if __name__ == "__main__":
  main()
