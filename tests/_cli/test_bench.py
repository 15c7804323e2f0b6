"""`python -m dataloader bench` hands its options to tools/bench.py."""


def test_bench_help_is_the_tools_own(capsys):
    from dataloader.__main__ import main

    try:
        main(["bench", "--help"])
    except SystemExit as stop:
        assert stop.code == 0
    assert "--workloads" in capsys.readouterr().out
