"""Imported graphs addressed by a string, wherever graphs are named (CLI, suites, environments).

- ``pipedream:NAME`` — a PipeDream profile (:func:`~graphopt.importers.pipedream.load_pipedream`),
  e.g. ``pipedream:resnet50``; ``pipedream:PATH.txt`` for a profile file of your own.
- ``tarnawski:NAME`` — an operator graph of Tarnawski et al. (NeurIPS 2020) with measured costs
  (:func:`~graphopt.importers.tarnawski.load_tarnawski`), e.g. ``tarnawski:bert_l-3``;
  ``tarnawski:PATH.json`` for a file of the dnn-partitioning format. These are inference graphs:
  the mode is the file's (a ``mode`` in the query is refused). Their own cluster is
  :func:`~graphopt.importers.tarnawski.load_tarnawski`'s second result.
- ``torch:NAME?ARG=INT&...`` — a zoo model (:func:`~graphopt.importers.zoo.load_zoo`), e.g.
  ``torch:gpt2?n_layer=12&seq=128``; imported once, then read from the on-disk cache.
- ``gen:FAMILY?ARG=INT&...`` — a configuration of a built-in family
  (:mod:`graphopt.workloads.generated`), e.g. ``gen:rnnlm?layers=2&hidden=256``; built, not
  imported, but named the same way so that it goes wherever an imported graph goes.

Imported graphs are training graphs (forward + backward) by default, as GO optimises training
steps; add ``mode=forward`` to the query (``pipedream:vgg16?mode=forward``) for the forward graph.
Generated graphs are always training steps.
"""

from __future__ import annotations

from pathlib import Path

from graphopt.graph import CompGraph

PREFIXES = ("pipedream:", "tarnawski:", "torch:", "gen:")
MODES = ("train", "forward")


def is_source(item: str) -> bool:
    """Whether ``item`` names an imported graph (starts with one of :data:`PREFIXES`)."""
    return item.startswith(PREFIXES)


def source_file(item: str) -> Path | None:
    """The profile file of ``pipedream:PATH`` (query aside) when that file exists, else ``None``:
    how :func:`graphopt.workloads.registry.split_spec` tells a path that holds a comma from a
    list."""
    if not item.startswith("pipedream:"):
        return None
    base, _, query = item[len("pipedream:") :].partition("?")
    if "," in query:  # a query holds no comma: a list goes on after it
        return None
    path = Path(base)
    try:
        return path if path.is_file() else None
    except (OSError, ValueError):  # a name too long, a NUL in it
        return None


def _split_mode(item: str) -> tuple[str, bool]:
    base, _, query = item.partition("?")
    kept, mode = [], "train"
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key == "mode":
            if value not in MODES:
                raise ValueError(f"{item!r}: mode must be one of {', '.join(MODES)}, got {value!r}")
            mode = value
        else:
            kept.append(part)
    return base + ("?" + "&".join(kept) if kept else ""), mode == "train"


def load_source(item: str) -> CompGraph:
    """The graph named by ``item`` (see the module docstring).

    Raises:
        ValueError: an unknown prefix, profile, zoo model or generated family, a profile file that
            does not exist or cannot be read, a bad argument, or a failed import.
    """
    if item.startswith("gen:"):  # always a training step: its arguments name no mode
        from graphopt.workloads.generated import build_generated

        return build_generated(item)
    if item.startswith("tarnawski:"):  # the file says forward or training: no mode
        from graphopt.importers.tarnawski import load_tarnawski

        name = item[len("tarnawski:") :]
        if "?" in name:
            raise ValueError(
                f"{item!r}: a Tarnawski operator graph takes no arguments; write tarnawski:NAME"
            )
        return load_tarnawski(name)[0]
    spec, training = _split_mode(item)
    if spec.startswith("pipedream:"):
        from graphopt.importers.pipedream import list_profiles, load_pipedream

        name = spec[len("pipedream:") :]
        if name.endswith(".txt") or "/" in name:
            try:
                return load_pipedream(name, training=training)
            except FileNotFoundError as e:  # no such file: the message lists the known names
                raise ValueError(str(e)) from None
            except OSError as e:  # a directory, no permission, a name too long
                raise ValueError(
                    f"cannot read PipeDream profile {name!r}: {e.strerror or e}; pass a readable "
                    "graph.txt file or the name of a known profile"
                ) from None
        profiles = list_profiles()
        if name not in profiles:
            raise ValueError(
                f"unknown PipeDream profile {name!r}; known: {', '.join(profiles) or '(none found)'}"
            )
        label = f"pipedream:{name}" + (" (training)" if training else "")
        return load_pipedream(profiles[name], training=training, name=label)
    if spec.startswith("torch:"):
        from graphopt.importers.zoo import load_zoo

        return load_zoo(spec, training=training)
    raise ValueError(f"{item!r} is not an imported graph; prefixes are: {', '.join(PREFIXES)}")
