#!/usr/bin/env python3
"""Profiles a few training steps of a small PyTorch CNN with mlprof: every
aten operator (forward and backward) with shapes and FLOPs, each module's
forward and backward by its path, and a frame per step; then prints the
statistics and where the trace went.

usage: torch_train.py [--steps N] [--batch B] [--out trace.json]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import torch  # noqa: E402

import mlprof  # noqa: E402
import mlprof.torch  # noqa: E402


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block1 = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16),
                                          torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.block2 = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
                                          torch.nn.MaxPool2d(2))
        self.classifier = torch.nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        return self.classifier(self.block2(self.block1(x)).flatten(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--out", default="torch_train.json")
    args = ap.parse_args()
    torch.manual_seed(0)
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = torch.randn(args.batch, 3, 32, 32), torch.randint(0, 10, (args.batch,))

    mlprof.set_config(filename=args.out, memory_svg="", memory_csv="")
    step = mlprof.Domain("train").new_frame("step")
    mlprof.set_state("run")
    with mlprof.torch.trace(model, name="model"):
        for i in range(args.steps):
            with step:
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(images), labels)
                loss.backward()
                opt.step()
    path = mlprof.dump()
    print(mlprof.dumps(sort_by="total"))
    print(f"loss after {args.steps} steps: {loss.item():.4f}")
    print(f"trace: {os.path.abspath(path)}")


if __name__ == "__main__":
    main()
