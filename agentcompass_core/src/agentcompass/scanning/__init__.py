"""The scanner engine: reads each attempt of a run directory as a
:class:`~agentcompass.runtime.scanning.Transcript`, runs the chosen scanners on it and writes their findings to
``scans.jsonl`` (masked of the run's secrets) — after the fact (:func:`~agentcompass.scanning.engine.scan_run`,
``agentcompass scan``) or as each attempt finishes (:class:`~agentcompass.scanning.observer.ScanObserver`,
``run --scan``, fed by the ``agentcompass_result_recorded`` hook). Its seam is the public contract in
:mod:`agentcompass.runtime.scanning` and the ``register_scanners`` hook; the runner knows nothing of it.

* :mod:`~agentcompass.scanning.names`: the built-in names and the file name;
* :mod:`~agentcompass.scanning.builtin`: the built-in scanners;
* :mod:`~agentcompass.scanning.workspace`: whether an attempt changed its workspace (its patch, its tool calls);
* :mod:`~agentcompass.scanning.transcripts`: a run directory's attempts as transcripts;
* :mod:`~agentcompass.scanning.store`: ``scans.jsonl`` written, read and counted;
* :mod:`~agentcompass.scanning.engine`: scanners chosen by name and run over a run;
* :mod:`~agentcompass.scanning.judge`: the ``judge:RUBRIC`` scanner;
* :mod:`~agentcompass.scanning.judge_replay`: its calls answered from a recorded scan (``scan --replay``);
* :mod:`~agentcompass.scanning.observer`: ``run --scan``, from the records the run hands over.
"""
