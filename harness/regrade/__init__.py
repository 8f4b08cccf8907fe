"""`forgebench regrade`: published sets of LLM-written solutions graded here and recorded as runs
(layouts: the folders read; grade: build and time; record: MLflow; report: journal and report;
command: the CLI's entry; export: a run's kernels in KernelBench's runs layout)."""
