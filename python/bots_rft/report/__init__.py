"""Tables and plots of comparisons, simulated or trained.

- :mod:`.tables`: the paper's comparison table (TTB, BSF, ETR, ...) as markdown;
- :mod:`.simulation`: the tables of a ``bots simulate`` experiment (and ``bots demo``'s short
  comparison); :mod:`.simulation_plots`: its figures; :mod:`.simulation_files`: every file it
  writes (markdown, CSV, JSON, PNG);
- :mod:`.training`: curves, tables and plots of ``bots compare`` training runs;
  :mod:`.compare_summary`: the report ``bots compare`` writes from them (summary.md, held_out.csv,
  the curves);
- :mod:`.trial`: a comparison read as a trial: every held-out evaluation as CSV, the primary
  metric paired by seed, a decision rule's verdict and the reference rollouts charged;
- :mod:`.step_rule`: which of the simulated learner's step rules real runs follow, fitted to their
  logged signals and held-out gains.

Each module imports only what it draws on (matplotlib when a plot is drawn), so nothing is
loaded here.
"""
