"""ResNet-18 as torchvision lays it out, for ``ember bench --torch`` and the tests:
torchvision's own wheel on the package index needs CUDA's torch, so it cannot be
imported beside the CPU build. (Imported only where torch is installed.)"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    """ResNet-18's block: two 3x3 convolutions; a strided one, and a 1x1 strided
    convolution on the shortcut, where the stage starts smaller and wider."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.downsample = None if stride == 1 and inputs == outputs else nn.Sequential(
            nn.Conv2d(inputs, outputs, 1, stride=stride, bias=False), nn.BatchNorm2d(outputs))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        y = F.relu(self.bn1(self.conv1(x)), inplace=True)
        return F.relu(self.bn2(self.conv2(y)) + shortcut, inplace=True)


class ResNet18(nn.Module):
    """The 7x7 strided stem and its max pool, four stages of two blocks (64 to 512
    channels), global average pooling and a linear head: torchvision's resnet18 with
    ``classes`` outputs."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        widths = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
        self.stages = nn.Sequential(*(nn.Sequential(BasicBlock(i, o, s), BasicBlock(o, o, 1))
                                      for i, o, s in widths))
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))
