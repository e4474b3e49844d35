"""Pure ``torch.nn`` definitions of the zoo's architectures (see :mod:`graphopt.importers.zoo`).

Each class is a standard architecture cut down to its defining structure and a few size arguments,
so that it builds on the meta device in milliseconds and imports with
:func:`~graphopt.importers.torch.from_torch`. Every model maps its inputs to logits whose last dimension is a class or
vocabulary axis; :func:`cross_entropy` is the training loss.

===========================  ============================================================
:class:`Seq2SeqLSTM`         GNMT-style LSTM encoder-decoder with Luong attention (Luong
                             et al. 2015; Wu et al. 2016)
:class:`Seq2SeqTransformer`  Transformer encoder-decoder (Vaswani et al. 2017),
                             ``nn.Transformer``
:class:`ResNet`              ResNet-18/34/50/101/152 (He et al. 2016), basic and
                             bottleneck blocks
:class:`InceptionNet`        Inception-v3-style CNN (Szegedy et al. 2016): 4-branch
                             modules, factorised 1x7/7x1 modules, grid reductions
:class:`WaveNet`             WaveNet (van den Oord et al. 2016): dilated causal
                             convolutions, gated activations, residual and skip
                             connections
:class:`MobileNetV2`         MobileNetV2 (Sandler et al. 2018): inverted residual
                             blocks with depthwise convolutions, ReLU6
:class:`VisionTransformer`   ViT (Dosovitskiy et al. 2021): patch embedding, class token,
                             pre-norm encoder blocks
:class:`GRULanguageModel`    GRU language model (Cho et al. 2014), stacked ``nn.GRU``
:class:`UNet`                U-Net (Ronneberger et al. 2015): max-pool down, transposed
                             convolutions up, skip concatenations, per-pixel classes
===========================  ============================================================
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of ``logits [..., C]`` against integer ``targets [...]``."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# ---------------------------------------------------------------------------- LSTM seq2seq
class Seq2SeqLSTM(nn.Module):
    """Encoder-decoder LSTM with Luong ("general") attention over the encoder states.

    Args:
        vocab: source and target vocabulary size.
        hidden: embedding and LSTM width.
        layers: stacked LSTM layers in the encoder and in the decoder.

    Shapes:
        ``src [B, S]`` and ``tgt [B, T]`` token ids (teacher forcing) -> logits ``[B, T, vocab]``.
    """

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab, hidden)
        self.tgt_embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.decoder = nn.LSTM(hidden, hidden, layers, batch_first=True)
        self.score = nn.Linear(hidden, hidden, bias=False)
        self.combine = nn.Linear(2 * hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        enc, state = self.encoder(self.src_embed(src))
        dec, _ = self.decoder(self.tgt_embed(tgt), state)
        scores = torch.bmm(self.score(dec), enc.transpose(1, 2))  # [B, T, S]
        context = torch.bmm(scores.softmax(dim=-1), enc)
        attended = torch.tanh(self.combine(torch.cat([dec, context], dim=-1)))
        return self.out(attended)


# ---------------------------------------------------------------------------- Transformer
class Seq2SeqTransformer(nn.Module):
    """Transformer encoder-decoder: shared token embedding, learned positions, causal decoder.

    Args:
        vocab: vocabulary size (shared by source and target).
        d_model: model width; ``heads`` must divide it.
        heads: attention heads.
        ff: feed-forward width.
        layers: encoder layers and decoder layers (each).
        max_len: longest sequence the position table covers.

    Shapes:
        ``src [B, S]`` and ``tgt [B, T]`` token ids -> logits ``[B, T, vocab]``.
    """

    def __init__(
        self, vocab: int, d_model: int, heads: int, ff: int, layers: int, max_len: int
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(
            d_model,
            heads,
            num_encoder_layers=layers,
            num_decoder_layers=layers,
            dim_feedforward=ff,
            batch_first=True,
        )
        # Plain layers: no nested-tensor fast path (it needs real data), same ops in both modes.
        self.transformer.encoder.enable_nested_tensor = False
        self.out = nn.Linear(d_model, vocab)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        s, t = src.shape[1], tgt.shape[1]
        src_h = self.embed(src) + self.pos(torch.arange(s, device=src.device))
        tgt_h = self.embed(tgt) + self.pos(torch.arange(t, device=tgt.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=tgt.device)
        # tgt_is_causal=True: nn.Transformer would otherwise compare the mask's values (a
        # data-dependent check torch.export cannot capture).
        hidden = self.transformer(src_h, tgt_h, tgt_mask=mask, tgt_is_causal=True)
        return self.out(hidden)


# ---------------------------------------------------------------------------- ResNet
def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, bias=False),
        nn.BatchNorm2d(cout),
    )


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a shortcut (ResNet-18/34)."""

    expansion = 1

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv_bn(cin, width, 3, stride)
        self.conv2 = _conv_bn(width, cout, 3)
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: Tensor) -> Tensor:
        y = self.conv2(F.relu(self.conv1(x)))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), and a shortcut (ResNet-50/101/152)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = _conv_bn(cin, width, 1)
        self.conv2 = _conv_bn(width, width, 3, stride)
        self.conv3 = _conv_bn(width, cout, 1)
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: Tensor) -> Tensor:
        y = self.conv3(F.relu(self.conv2(F.relu(self.conv1(x)))))
        return F.relu(y + (self.shortcut(x) if self.shortcut is not None else x))


RESNET_DEPTHS: dict[int, tuple[type[nn.Module], tuple[int, ...]]] = {
    18: (BasicBlock, (2, 2, 2, 2)),
    34: (BasicBlock, (3, 4, 6, 3)),
    50: (Bottleneck, (3, 4, 6, 3)),
    101: (Bottleneck, (3, 4, 23, 3)),
    152: (Bottleneck, (3, 8, 36, 3)),
}


class ResNet(nn.Module):
    """ResNet for image classification.

    Args:
        depth: one of :data:`RESNET_DEPTHS` (18, 34, 50, 101, 152).
        width: channels of the stem and of the first stage (64 in the paper); stages double it.
        classes: output classes.

    Shapes:
        ``images [B, 3, H, W]`` -> logits ``[B, classes]``.
    """

    def __init__(self, depth: int, width: int, classes: int) -> None:
        super().__init__()
        block, counts = RESNET_DEPTHS[depth]
        self.stem = _conv_bn(3, width, 7, stride=2)
        stages: list[nn.Module] = []
        cin = width
        for i, count in enumerate(counts):
            blocks = []
            for j in range(count):
                blocks.append(block(cin, width * 2**i, stride=2 if i > 0 and j == 0 else 1))
                cin = width * 2**i * block.expansion  # type: ignore[attr-defined]
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = F.max_pool2d(F.relu(self.stem(images)), 3, stride=2, padding=1)
        x = self.stages(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ---------------------------------------------------------------------------- Inception
class ConvBNReLU(nn.Sequential):
    """Convolution (no bias), batch norm, activation (ReLU unless ``activation`` names another);
    ``padding`` keeps the size at stride 1; ``groups`` as in ``nn.Conv2d`` (``cin``: depthwise)."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int | tuple[int, int],
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] = nn.ReLU,
    ) -> None:
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        super().__init__(
            nn.Conv2d(
                cin, cout, (kh, kw), stride, padding=(kh // 2, kw // 2), groups=groups, bias=False
            ),
            nn.BatchNorm2d(cout),
            activation(),
        )


class InceptionA(nn.Module):
    """Four branches: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; 3x3 average pool -> 1x1."""

    def __init__(self, cin: int, w: int) -> None:
        super().__init__()
        self.b1 = ConvBNReLU(cin, 2 * w, 1)
        self.b5 = nn.Sequential(ConvBNReLU(cin, 3 * w // 2, 1), ConvBNReLU(3 * w // 2, 2 * w, 5))
        self.b3 = nn.Sequential(
            ConvBNReLU(cin, 2 * w, 1), ConvBNReLU(2 * w, 3 * w, 3), ConvBNReLU(3 * w, 3 * w, 3)
        )
        self.pool = ConvBNReLU(cin, w, 1)
        self.out_channels = 8 * w

    def forward(self, x: Tensor) -> Tensor:
        pooled = self.pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), pooled], dim=1)


class InceptionC(nn.Module):
    """Factorised 7x7 branches: 1x1; 1x7 -> 7x1; (7x1 -> 1x7) x 2; average pool -> 1x1."""

    def __init__(self, cin: int, w: int) -> None:
        super().__init__()
        c7 = 4 * w
        self.b1 = ConvBNReLU(cin, 6 * w, 1)
        self.b7 = nn.Sequential(
            ConvBNReLU(cin, c7, 1), ConvBNReLU(c7, c7, (1, 7)), ConvBNReLU(c7, 6 * w, (7, 1))
        )
        self.b77 = nn.Sequential(
            ConvBNReLU(cin, c7, 1),
            ConvBNReLU(c7, c7, (7, 1)),
            ConvBNReLU(c7, c7, (1, 7)),
            ConvBNReLU(c7, c7, (7, 1)),
            ConvBNReLU(c7, 6 * w, (1, 7)),
        )
        self.pool = ConvBNReLU(cin, 6 * w, 1)
        self.out_channels = 24 * w

    def forward(self, x: Tensor) -> Tensor:
        pooled = self.pool(F.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([self.b1(x), self.b7(x), self.b77(x), pooled], dim=1)


class Reduction(nn.Module):
    """Grid reduction: strided 3x3; 1x1 -> 3x3 -> strided 3x3; strided max pool."""

    def __init__(self, cin: int, w: int) -> None:
        super().__init__()
        self.b3 = ConvBNReLU(cin, 12 * w, 3, stride=2)
        self.b33 = nn.Sequential(
            ConvBNReLU(cin, 2 * w, 1), ConvBNReLU(2 * w, 3 * w, 3), ConvBNReLU(3 * w, 3 * w, 3, 2)
        )
        self.out_channels = cin + 15 * w

    def forward(self, x: Tensor) -> Tensor:
        pooled = F.max_pool2d(x, 3, stride=2, padding=1)
        return torch.cat([self.b3(x), self.b33(x), pooled], dim=1)


class InceptionNet(nn.Module):
    """Inception-v3-style classifier: stem, ``blocks`` InceptionA modules, a grid reduction,
    ``blocks`` InceptionC modules, global average pooling, dropout, classifier.

    Args:
        blocks: modules per stage (3 and 4 in Inception-v3).
        width: base channel count (32 in Inception-v3's stem); every branch is a multiple of it.
        classes: output classes.

    Shapes:
        ``images [B, 3, H, W]`` -> logits ``[B, classes]``.
    """

    def __init__(self, blocks: int, width: int, classes: int) -> None:
        super().__init__()
        w = width
        self.stem = nn.Sequential(
            ConvBNReLU(3, w, 3, stride=2),
            ConvBNReLU(w, w, 3),
            ConvBNReLU(w, 2 * w, 3),
            nn.MaxPool2d(3, stride=2, padding=1),
            ConvBNReLU(2 * w, 5 * w // 2, 1),
            ConvBNReLU(5 * w // 2, 6 * w, 3),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        cin = 6 * w
        mixed_a = []
        for _ in range(blocks):
            mixed_a.append(InceptionA(cin, w))
            cin = mixed_a[-1].out_channels
        self.mixed_a = nn.Sequential(*mixed_a)
        self.reduction = Reduction(cin, w)
        cin = self.reduction.out_channels
        mixed_c = []
        for _ in range(blocks):
            mixed_c.append(InceptionC(cin, w))
            cin = mixed_c[-1].out_channels
        self.mixed_c = nn.Sequential(*mixed_c)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(cin, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.mixed_c(self.reduction(self.mixed_a(self.stem(images))))
        return self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


# ---------------------------------------------------------------------------- WaveNet
class WaveNetLayer(nn.Module):
    """Dilated causal convolution (kernel 2), gated tanh x sigmoid, 1x1 residual and skip.

    The last layer has no residual output (nothing would read it: ``torch.export`` drops dead
    code, while ``FlopCounterMode`` would count it)."""

    def __init__(self, residual: int, skip: int, dilation: int, last: bool = False) -> None:
        super().__init__()
        self.dilation = dilation
        self.conv = nn.Conv1d(residual, 2 * residual, 2, dilation=dilation)
        self.res = None if last else nn.Conv1d(residual, residual, 1)
        self.skip = nn.Conv1d(residual, skip, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        filt, gate = self.conv(F.pad(x, (self.dilation, 0))).chunk(2, dim=1)
        z = torch.tanh(filt) * torch.sigmoid(gate)
        return (x if self.res is None else x + self.res(z)), self.skip(z)


class WaveNet(nn.Module):
    """WaveNet over quantised audio samples.

    Args:
        layers: layers per stack, with dilations 1, 2, 4, ..., 2**(layers-1).
        stacks: repetitions of the dilation stack.
        residual: residual channels.
        skip: skip channels.
        classes: quantisation levels (256 for 8-bit mu-law).

    Shapes:
        ``samples [B, T]`` class ids -> logits ``[B, T, classes]`` for the next sample.
    """

    def __init__(self, layers: int, stacks: int, residual: int, skip: int, classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(classes, residual)
        dilations = [2**i for _ in range(stacks) for i in range(layers)]
        self.layers = nn.ModuleList(
            WaveNetLayer(residual, skip, d, last=k == len(dilations) - 1)
            for k, d in enumerate(dilations)
        )
        self.post1 = nn.Conv1d(skip, skip, 1)
        self.post2 = nn.Conv1d(skip, classes, 1)

    def forward(self, samples: Tensor) -> Tensor:
        x = self.embed(samples).transpose(1, 2)  # [B, C, T]
        skips: Tensor | None = None
        for layer in self.layers:
            x, s = layer(x)
            skips = s if skips is None else skips + s
        assert skips is not None
        out = self.post2(F.relu(self.post1(F.relu(skips))))
        return out.transpose(1, 2)


# ---------------------------------------------------------------------------- MobileNetV2
MOBILENET_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
"""MobileNetV2's bottleneck stages (Sandler et al. 2018, table 2): expansion ``t``, channels
``c`` at the paper's stem width 32, blocks ``n``, stride ``s`` of the first block: 17 blocks."""

MOBILENET_BLOCKS = sum(n for _, _, n, _ in MOBILENET_STAGES)


class InvertedResidual(nn.Module):
    """1x1 expansion (ReLU6), 3x3 depthwise convolution (ReLU6), linear 1x1 projection; the input
    is added back when the shapes match (stride 1, ``cin == cout``)."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNReLU(cin, hidden, 1, activation=nn.ReLU6))
        layers += [
            ConvBNReLU(hidden, hidden, 3, stride, groups=hidden, activation=nn.ReLU6),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: Tensor) -> Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNetV2 image classifier: strided 3x3 stem, the first ``blocks`` inverted residual
    blocks of :data:`MOBILENET_STAGES`, 1x1 head convolution, global average pooling, dropout,
    classifier.

    Args:
        width: stem channels (32 in the paper: width multiplier ``width / 32``); a multiple of 4,
            the stages have ``c * width / 32`` channels and the head ``40 * width``.
        blocks: inverted residual blocks kept, 1 to 17 (17: the full network).
        classes: output classes.

    Shapes:
        ``images [B, 3, H, W]`` -> logits ``[B, classes]``.
    """

    def __init__(self, width: int, blocks: int, classes: int) -> None:
        super().__init__()
        self.stem = ConvBNReLU(3, width, 3, stride=2, activation=nn.ReLU6)
        layers: list[nn.Module] = []
        cin = width
        for t, c, n, s in MOBILENET_STAGES:
            for i in range(n):
                if len(layers) < blocks:
                    cout = c * width // 32
                    layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                    cin = cout
        self.blocks = nn.Sequential(*layers)
        self.head = ConvBNReLU(cin, 40 * width, 1, activation=nn.ReLU6)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(40 * width, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.head(self.blocks(self.stem(images)))
        return self.fc(self.dropout(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


# ---------------------------------------------------------------------------- ViT
class ViTBlock(nn.Module):
    """Pre-norm encoder block: ``x + attention(norm(x))``, then ``x + mlp(norm(x))`` (GELU).

    Attention is written out (``softmax(q k^T / sqrt(d)) v``) rather than fused, so its matmuls
    and softmax are ops of the graph."""

    def __init__(self, d_model: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, mlp), nn.GELU(), nn.Linear(mlp, d_model))

    def forward(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each [B, heads, N, d / heads]
        scores = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """ViT image classifier: non-overlapping patches embedded by a strided convolution, a class
    token, learned positions, ``layers`` :class:`ViTBlock` s, a final norm and a linear head on
    the class token.

    Args:
        image: image side; ``patch`` must divide it.
        patch: patch side (16 in ViT-B/16).
        d_model: model width; ``heads`` must divide it.
        heads: attention heads.
        mlp: hidden width of each block's MLP (``4 * d_model`` in the paper).
        layers: encoder blocks.
        classes: output classes.

    Shapes:
        ``images [B, 3, image, image]`` -> logits ``[B, classes]``.
    """

    def __init__(
        self, image: int, patch: int, d_model: int, heads: int, mlp: int, layers: int, classes: int
    ) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, d_model, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d_model))
        self.blocks = nn.Sequential(*(ViTBlock(d_model, heads, mlp) for _ in range(layers)))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.patch_embed(images).flatten(2).transpose(1, 2)  # [B, patches, d_model]
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


# ---------------------------------------------------------------------------- GRU LM
class GRULanguageModel(nn.Module):
    """Next-token GRU language model: embedding, stacked ``nn.GRU``, projection to the vocabulary.

    The GRU starts from zeros and its final state is dropped (no state is passed between calls).

    Args:
        vocab: vocabulary size.
        hidden: embedding and GRU width.
        layers: stacked GRU layers.

    Shapes:
        ``tokens [B, T]`` token ids -> logits ``[B, T, vocab]``.
    """

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, layers, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        hidden, _ = self.gru(self.embed(tokens))
        return self.out(hidden)


# ---------------------------------------------------------------------------- U-Net
class DoubleConv(nn.Sequential):
    """Two 3x3 :class:`ConvBNReLU` s (the size kept)."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(ConvBNReLU(cin, cout, 3), ConvBNReLU(cout, cout, 3))


class UNet(nn.Module):
    """U-Net segmentation network: ``depth`` levels down (2x2 max pool, :class:`DoubleConv`,
    channels doubled), as many up (2x2 stride-2 transposed convolution halving the channels,
    concatenation with the skip of the same level, :class:`DoubleConv`), a 1x1 classifier per
    pixel. Padded convolutions, so the output keeps the input's size.

    Args:
        depth: down (and up) levels (4 in the paper); the image side must be a multiple of
            ``2**depth``.
        width: channels of the first level (64 in the paper).
        classes: classes per pixel.

    Shapes:
        ``images [B, 3, H, W]`` -> logits ``[B, H, W, classes]``.
    """

    def __init__(self, depth: int, width: int, classes: int) -> None:
        super().__init__()
        self.inc = DoubleConv(3, width)
        self.down = nn.ModuleList(
            DoubleConv(width * 2**i, width * 2 ** (i + 1)) for i in range(depth)
        )
        self.up = nn.ModuleList(
            nn.ConvTranspose2d(width * 2 ** (i + 1), width * 2**i, 2, stride=2)
            for i in reversed(range(depth))
        )
        self.merge = nn.ModuleList(
            DoubleConv(width * 2 ** (i + 1), width * 2**i) for i in reversed(range(depth))
        )
        self.out = nn.Conv2d(width, classes, 1)

    def forward(self, images: Tensor) -> Tensor:
        x = self.inc(images)
        skips = []
        for down in self.down:
            skips.append(x)
            x = down(F.max_pool2d(x, 2))
        for up, merge in zip(self.up, self.merge, strict=True):
            x = merge(torch.cat([skips.pop(), up(x)], dim=1))
        return self.out(x).permute(0, 2, 3, 1)
