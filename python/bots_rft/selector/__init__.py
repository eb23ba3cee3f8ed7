"""Everything that picks tasks: the selector protocol, each method's parameters and the registry
of methods, the BOTS selector and its backends, the static and the published peer selectors,
rollout planning, screening, the group guard and multi-pool selection.

- :mod:`~bots_rft.selector.protocol`: ``Selector``, ``RollsOut``, what every method provides;
- :mod:`~bots_rft.parameters`: every method parameter, its default and its range;
- :mod:`~bots_rft.selector.registry`: the methods by name, each built from a pool and references;
- :mod:`~bots_rft.selector.bots`: :class:`~bots_rft.BOTS`, its posterior rules and checkpoint layout;
- :mod:`~bots_rft.selector.backends`: BOTS's backends (the Rust core, torch, Ray shards);
- :mod:`~bots_rft.selector.static`: random, offline and reference-filter selection;
- :mod:`~bots_rft.selector.peers`: the published selectors BOTS is compared with;
- :mod:`~bots_rft.selector.plan`, :mod:`~bots_rft.selector.screen`: rollout counts per task, and
  screening before the batch;
- :mod:`~bots_rft.selector.guard`, :mod:`~bots_rft.selector.multipool`: the group guard and one
  selector over several pools.

BOTS's public names are ``bots_rft``'s (``from bots_rft import BOTS``) and, with its internals,
:mod:`bots_rft.selector.bots`'s; this package re-exports none of them, so it has one public surface.
"""
