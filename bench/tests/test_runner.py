"""Tests of bench/runner.py (Python standard library only).

Run: python3 -m unittest discover -s bench/tests   (or bench/tests/run_py_tests.py)
The end-to-end tests use fake configurations whose `command` is a small
shell command, so they need neither MPI nor the bench programs.
"""

import configparser
import csv
import io
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import runner  # noqa: E402


def config_from_text(text):
    cp = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",),
                                   inline_comment_prefixes=None, default_section="__none__")
    cp.optionxform = str
    cp.read_string(textwrap.dedent(text))
    return cp


class ParseOutputTest(unittest.TestCase):
    def test_header_and_rows(self):
        out = ("# bench=latency unit=us np=2 iters=10\n"
               "# columns=size,latency_us\n"
               "1 0.250\n"
               "some warning printed by a library\n"
               "1024 1.5 extra columns 7\n"
               "# verify=ok bench=latency\n")
        header, rows = runner.parse_output(out)
        self.assertEqual(header["bench"], "latency")
        self.assertEqual(header["unit"], "us")
        self.assertEqual(header["np"], "2")
        self.assertEqual(rows, [(1, 0.25), (1024, 1.5)])

    def test_rate_rows_take_the_first_value_column(self):
        header, rows = runner.parse_output("# bench=msgrate unit=msg/s\n8 12345.5 0.099\n")
        self.assertEqual(header["unit"], "msg/s")
        self.assertEqual(rows, [(8, 12345.5)])

    def test_no_header_is_unparsable(self):
        with self.assertRaises(runner.ParseError) as cm:
            runner.parse_output("hello\n1 2.0\n")
        self.assertIn("unparsable output", str(cm.exception))
        self.assertIn("hello", str(cm.exception))

    def test_no_rows_is_unparsable(self):
        with self.assertRaises(runner.ParseError) as cm:
            runner.parse_output("# bench=bw unit=MB/s\n")
        self.assertIn("no data rows", str(cm.exception))

    def test_failed_verification_is_an_error(self):
        with self.assertRaises(runner.ParseError) as cm:
            runner.parse_output("# bench=bw unit=MB/s\n1 2.0\n# verify=FAILED bench=bw errors=3\n")
        self.assertIn("verification failed", str(cm.exception))


class SummaryTest(unittest.TestCase):
    def test_median_min_max_odd(self):
        self.assertEqual(runner.summarize([3.0, 1.0, 2.0]), (2.0, 1.0, 3.0))

    def test_median_min_max_even(self):
        self.assertEqual(runner.summarize([4.0, 1.0, 2.0, 10.0]), (3.0, 1.0, 10.0))

    def test_single_value(self):
        self.assertEqual(runner.summarize([5.5]), (5.5, 5.5, 5.5))
        self.assertEqual(runner.fmt_cell([5.5]), "5.50")

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            runner.summarize([])

    def test_cell_format(self):
        self.assertEqual(runner.fmt_cell([0.25, 0.3, 0.2]), "0.25 (0.2-0.3)")
        self.assertEqual(runner.fmt_cell([12.7e6, 12.5e6, 12.9e6]), "12.7M (12.5M-12.9M)")
        self.assertEqual(runner.fmt_size(4096), "4K")
        self.assertEqual(runner.fmt_size(3 << 20), "3M")
        self.assertEqual(runner.fmt_size(1000), "1000")

    def test_table_has_medians_and_spread_per_size(self):
        R = runner.RunResult
        results = [
            R(1, "latency", "A", "ok", rows=[(1, 1.0), (8, 2.0)], unit="us"),
            R(2, "latency", "A", "ok", rows=[(1, 3.0), (8, 4.0)], unit="us"),
            R(3, "latency", "A", "ok", rows=[(1, 2.0), (8, 9.0)], unit="us"),
            R(1, "latency", "B", "ok", rows=[(1, 7.0)], unit="us"),
            R(2, "latency", "B", "failed", error="boom | bang"),
        ]
        md = runner.markdown_tables(results, ["A", "B"], ["latency"])
        lines = md.splitlines()
        self.assertIn("| size | A | B |", lines)
        self.assertIn("| status | ok 3/3 | ok 1/2; failed: boom \\| bang |", lines)
        self.assertIn("| 1 | 2.00 (1.00-3.00) | 7.00 |", lines)
        self.assertIn("| 8 | 4.00 (2.00-9.00) | - |", lines)

    def test_ratio_to_the_anchor_is_taken_per_rep(self):
        R = runner.RunResult
        # rep by rep: A/V = 2/1, 3/2, 8/2 -> ratios 2.0, 1.5, 4.0
        results = [R(rep, "latency", c, "ok", rows=[(1, v)], unit="us")
                   for rep, c, v in ((1, "A", 2.0), (1, "V", 1.0), (2, "A", 3.0), (2, "V", 2.0),
                                     (3, "A", 8.0), (3, "V", 2.0))]
        md = runner.markdown_tables(results, ["A", "V"], ["latency"], anchors={"A": "V"})
        lines = md.splitlines()
        self.assertIn("| size | A | A / V | V |", lines)
        self.assertIn("| 1 | 3.00 (2.00-8.00) | 2.00 (1.50-4.00) | 2.00 (1.00-2.00) |", lines)
        # a rep the anchor lacks gives no ratio
        self.assertEqual(runner.rep_ratios({"by_rep": {1: {1: 2.0, 2: 4.0}}},
                                           {"by_rep": {1: {2: 2.0}}}, 1), [2.0])
        self.assertEqual(runner.fmt_ratio([]), "-")

    def test_verdict_counts_the_better_side_by_kind(self):
        R = runner.RunResult
        # latency, lower is better: A/V is 0.5 at size 1 and 2.0 at size 8;
        # bw, higher is better: the same values read the other way round
        results = []
        for bench in ("latency", "bw"):
            for rep in (1, 2, 3):
                results += [R(rep, bench, "A", "ok", rows=[(1, 1.0), (8, 4.0)], unit="x"),
                            R(rep, bench, "V", "ok", rows=[(1, 2.0), (8, 2.0)], unit="x")]
        lines = runner.verdicts(results, ["A", "V"], ["latency", "bw"], anchors={"A": "V"})
        self.assertEqual(lines, [
            "A against V, latency: at or below the anchor at 1 of 2 sizes, median ratios 0.50-2.00",
            "A against V, bw: at or above the anchor at 1 of 2 sizes, median ratios 0.50-2.00"])
        # no anchor, or nothing measured by both: nothing, or said so
        self.assertEqual(runner.verdicts(results, ["A", "V"], ["latency"]), [])
        failed = [R(1, "latency", "A", "ok", rows=[(1, 1.0)], unit="us"),
                  R(1, "latency", "V", "failed", error="boom")]
        self.assertEqual(runner.verdicts(failed, ["A", "V"], ["latency"], anchors={"A": "V"}),
                         ["A against V, latency: no size measured by both"])

    def test_groups_are_titled_tables_with_their_anchor_last(self):
        R = runner.RunResult
        results = [R(1, "latency", c, "ok", rows=[(1, v)], unit="us")
                   for c, v in (("D", 1.0), ("X", 3.0), ("V", 2.0))]
        md = runner.markdown_tables(results, ["D", "X", "V"], ["latency"],
                                    anchors={"D": "V", "X": "V"},
                                    groups=[("defaults", ["D"]), ("X changed", ["X"])])
        heads = [ln for ln in md.splitlines() if ln.startswith("###")]
        self.assertEqual(len(heads), 2)
        self.assertTrue(heads[0].startswith("### defaults: latency"))
        self.assertTrue(heads[1].startswith("### X changed: latency"))
        self.assertIn("| size | D | D / V | V |", md)
        self.assertIn("| size | X | X / V | V |", md)
        self.assertIn("| 1 | 3.00 | 1.50 | 2.00 |", md)
        # two configurations with one anchor: the anchor once, last
        md = runner.markdown_tables(results, ["D", "X", "V"], ["latency"],
                                    anchors={"D": "V", "X": "V"})
        self.assertIn("| size | D | D / V | X | X / V | V |", md)

    def test_most_frequent_error_is_shown(self):
        self.assertEqual(runner.main_error(["x", "y", "y"]), "y")
        self.assertEqual(runner.main_error(["x", "y"]), "x")


class ErrorLineTest(unittest.TestCase):
    def test_decorations_are_stripped(self):
        err = ("-------------------\n"
               "[host:123] [[4567,0],0] something broke badly\n"
               "-------------------\n")
        self.assertEqual(runner.first_error_line(err), "something broke badly")

    def test_missing_component_names_framework_and_component(self):
        err = ("------\nA requested component was not found, or was unable to be opened. Text\n"
               "more text\n\nHost: h\nFramework: mtl\nComponent: efa\n------\n"
               "[h:1] PML cm cannot be selected\n")
        self.assertEqual(runner.first_error_line(err), "requested component not found: mtl/efa")

    def test_mpi_error_code_is_used(self):
        err = ("[h:9] *** An error occurred in MPI_Win_create\n"
               "[h:9] *** reported by process [1,0]\n"
               "[h:9] *** MPI_ERR_WIN: invalid window\n")
        self.assertEqual(runner.first_error_line(err), "MPI_Win_create: MPI_ERR_WIN: invalid window")

    def test_message_of_the_bench_error_handler(self):
        err = ("[h:1] ORTE_ERROR_LOG: Data unpack failed in file show_help.c at line 1\n"
               "rank 0: MPI error in MPI_Win_create: MPI_ERR_WIN: invalid window\n")
        line = runner.first_error_line(err)
        self.assertEqual(line, "MPI_Win_create: MPI_ERR_WIN: invalid window")
        self.assertEqual(runner.error_strength(line), 3)

    def test_lost_message(self):
        err = "[h:1] [[2,0],0] ORTE_ERROR_LOG: Data unpack failed in file show_help.c at line 1\n"
        line = runner.first_error_line(err)
        self.assertEqual(line, runner.LOST_MESSAGE)
        self.assertEqual(runner.error_strength(line), 0)

    def test_strength_order(self):
        self.assertEqual(runner.error_strength("requested component not found: btl/efa"), 3)
        self.assertEqual(runner.error_strength("no pml component could be opened"), 2)
        self.assertEqual(runner.error_strength("PML cm cannot be selected"), 1)

    def test_long_lines_are_cut(self):
        self.assertEqual(len(runner.first_error_line("x" * 500, limit=50)), 50)


class ConfigTest(unittest.TestCase):
    INI = """
        [providers]
        rxm = tcp;ofi_rxm
        shm = shm
        efa = efa

        [defaults]
        standins = rxm shm
        common_args = --mca x 1

        [mtl_efa-{prov}]
        args = --mca pml cm --mca mtl efa --mca mtl_efa_provider_include {provider}
        efa = yes

        [ob1_tcp]
        args = --mca pml ob1 --mca btl self,tcp

        [only_rxm-{prov}]
        args = --mca p {provider}
        families = rma
        providers = rxm efa
        """

    def test_templates_expand_per_provider(self):
        cp = config_from_text(self.INI)
        cfgs = runner.expand_configs(cp, ["rxm", "shm"], env={})
        names = [c.name for c in cfgs]
        self.assertEqual(names, ["mtl_efa-rxm", "mtl_efa-shm", "ob1_tcp", "only_rxm-rxm"])
        rxm = cfgs[0]
        self.assertEqual(rxm.args, ["--mca", "x", "1", "--mca", "pml", "cm", "--mca", "mtl", "efa",
                                    "--mca", "mtl_efa_provider_include", "tcp;ofi_rxm"])
        self.assertEqual(cfgs[3].families, ("rma",))

    def test_component_path_only_for_efa_configs(self):
        cp = config_from_text(self.INI)
        cfgs = runner.expand_configs(cp, ["rxm"], env={"EFA_MCA_COMPONENT_PATH": "/x/lib"})
        efa = next(c for c in cfgs if c.name == "mtl_efa-rxm")
        tcp = next(c for c in cfgs if c.name == "ob1_tcp")
        i = efa.args.index("mca_base_component_path")
        self.assertTrue(efa.args[i + 1].endswith(":/x/lib"))
        self.assertEqual(efa.args[i - 1], "--mca")
        self.assertNotIn("mca_base_component_path", tcp.args)

    def test_best_provider(self):
        cp = config_from_text(self.INI)
        self.assertEqual(runner.resolve_providers(cp, None, efa_probe=lambda: False),
                         ["rxm", "shm"])
        self.assertEqual(runner.resolve_providers(cp, "best", efa_probe=lambda: True), ["efa"])
        self.assertEqual(runner.resolve_providers(cp, "shm", efa_probe=lambda: True), ["shm"])
        self.assertEqual(runner.resolve_providers(cp, "all", efa_probe=lambda: False),
                         ["rxm", "shm"])

    def test_selection_by_family_name_and_glob(self):
        cp = config_from_text(self.INI)
        cfgs = runner.expand_configs(cp, ["rxm", "shm"], env={})
        self.assertEqual([c.name for c in runner.select_configs(cfgs, "mtl_efa,ob1_tcp")],
                         ["mtl_efa-rxm", "mtl_efa-shm", "ob1_tcp"])
        self.assertEqual([c.name for c in runner.select_configs(cfgs, "*-shm")], ["mtl_efa-shm"])
        with self.assertRaises(SystemExit):
            runner.select_configs(cfgs, "nope")

    def test_project_config_file_parses(self):
        cp = runner.read_config_file(runner.DEFAULT_CONFIG_FILE)
        names = [c.name for c in runner.expand_configs(cp, ["rxm", "shm", "rxd"], env={})]
        for want in ("mtl_efa-rxm", "mtl_efa-shm", "mtl_efa-rxd", "btl_efa-rxm", "mtl_ofi-rxm",
                     "ob1_tcp", "ob1_vader", "osc_pt2pt-ob1_tcp", "osc_pt2pt-mtl_ofi-rxm",
                     "osc_rdma-ob1_tcp", "osc_rdma-ob1_vader", "osc_ucx",
                     "btl_efa_nocoalesce-rxm"):
            self.assertIn(want, names)

    def test_tables_and_anchors_from_the_command_line(self):
        cp = config_from_text(ConfigTest.INI)
        cfgs = runner.expand_configs(cp, ["rxm", "shm"], env={})
        tables = runner.parse_tables(["defaults=mtl_efa", "tcp=ob1_tcp"], cfgs)
        self.assertEqual(tables, [("defaults", ["mtl_efa-rxm", "mtl_efa-shm"]),
                                  ("tcp", ["ob1_tcp"])])
        specs = runner.parse_anchors(["mtl_efa-shm=ob1_tcp", "only_rxm"], cfgs)
        names = [c.name for c in cfgs]
        self.assertEqual(runner.anchor_of(specs, names),
                         {"mtl_efa-shm": "ob1_tcp", "mtl_efa-rxm": "only_rxm-rxm",
                          "ob1_tcp": "only_rxm-rxm"})
        # an anchor that is not run gives no ratio
        self.assertEqual(runner.anchor_of(specs, ["mtl_efa-rxm"]), {})
        with self.assertRaises(SystemExit):  # two configurations
            runner.parse_anchors(["mtl_efa"], cfgs)
        with self.assertRaises(SystemExit):  # no title
            runner.parse_tables(["mtl_efa"], cfgs)

    def test_binding(self):
        params = runner.RunParams(cores=2)
        cfg = runner.Config("c", ["--mca", "pml", "ob1"])
        cmd = runner.build_command(cfg, runner.BENCHES["latency"], params, "/bin")
        self.assertEqual(cmd[:5], ["mpirun", "-np", "2", "--bind-to", "core"])
        cmd = runner.build_command(cfg, runner.BENCHES["mpairs"], params, "/bin")
        self.assertEqual(cmd[:6], ["mpirun", "-np", "4", "--oversubscribe", "--bind-to", "none"])
        self.assertIn("/bin/bench_pt2pt", cmd)

    def test_launch_args_place_the_ranks_unbound(self):
        params = runner.RunParams(cores=2, hosts=("--hostfile", "/tmp/pn/hosts"))
        cfg = runner.Config("c", ["--mca", "pml", "ob1"])
        cmd = runner.build_command(cfg, runner.BENCHES["latency"], params, "/bin")
        self.assertEqual(cmd[:7], ["mpirun", "-np", "2", "--bind-to", "none", "--hostfile",
                                   "/tmp/pn/hosts"])
        self.assertNotIn("core", cmd)

    def test_a_rankfile_binds_the_ranks(self):
        for place in (["--rankfile", "/tmp/pn/rankfile"], ["--map-by", "rankfile:file=/tmp/pn/r"]):
            params = runner.RunParams(cores=2, hosts=tuple(["--hostfile", "/tmp/pn/hosts"] + place))
            cfg = runner.Config("c", ["--mca", "pml", "ob1"])
            cmd = runner.build_command(cfg, runner.BENCHES["latency"], params, "/bin")
            self.assertEqual(cmd[:5], ["mpirun", "-np", "2", "--hostfile", "/tmp/pn/hosts"])
            self.assertNotIn("--bind-to", cmd)


class PlacementNoteTest(unittest.TestCase):
    def test_unbound_without_a_rankfile(self):
        note = runner.placement_note(("--hostfile", "/tmp/pn/hosts"))
        self.assertIn("`--hostfile /tmp/pn/hosts`", note)
        self.assertIn("(not bound)", note)

    def test_a_rankfile_binds(self):
        # tests/pretend-nodes.sh DIR 1 core: its rankfile binds each rank
        for place in (("--rankfile", "/tmp/pn/rankfile"), ("--map-by", "rankfile:file=/tmp/r")):
            note = runner.placement_note(("--hostfile", "/tmp/pn/hosts") + place)
            self.assertNotIn("not bound", note)
            self.assertIn("bound by the rankfile", note)


class EnvTest(unittest.TestCase):
    """--env VAR=VALUE: the same variable for every configuration's ranks."""

    def test_every_command_exports_it(self):
        params = runner.RunParams(cores=2, env=("FI_EFA_ENABLE_SHM_TRANSFER=0",))
        for cfg in (runner.Config("a", ["--mca", "pml", "ob1"]),
                    runner.Config("b", ["--mca", "pml", "cm"])):
            cmd = runner.build_command(cfg, runner.BENCHES["latency"], params, "/bin")
            i = cmd.index("-x")
            self.assertEqual(cmd[i + 1], "FI_EFA_ENABLE_SHM_TRANSFER=0")
            self.assertLess(i, cmd.index("/bin/bench_pt2pt"))

    def test_with_launch_args_and_a_command_template(self):
        params = runner.RunParams(cores=2, hosts=("--rankfile", "/tmp/r"), env=("A=1", "B=2"))
        cfg = runner.Config("t", [], command="mpirun {launch} {program}")
        cmd = runner.build_command(cfg, runner.BENCHES["latency"], params, "/bin")
        self.assertEqual(cmd, ["mpirun", "-np", "2", "--rankfile", "/tmp/r", "-x", "A=1",
                               "-x", "B=2", "/bin/bench_pt2pt"])

    def test_dry_run_and_a_bad_value(self):
        with tempfile.TemporaryDirectory() as tmp:
            ini = os.path.join(tmp, "fake.ini")
            with open(ini, "w") as f:
                f.write("[providers]\nrxm = tcp;ofi_rxm\n[a]\nargs = --mca pml ob1\n"
                        "[b]\nargs = --mca pml cm\n")
            out = io.StringIO()
            runner.main(["--config-file", ini, "--dry-run", "-b", "latency", "-r", "1",
                         "--env", "X=0"], stdout=out)
            lines = out.getvalue().splitlines()
            self.assertEqual(len(lines), 2)
            for line in lines:
                self.assertIn(" -x X=0 ", line)
            with self.assertRaises(SystemExit):
                runner.build_parser().parse_args(["--env", "no_value"])


class InterleaveTest(unittest.TestCase):
    def test_order_rotates_by_one_configuration_each_rep(self):
        # a fixed order would run the last configuration (the anchor) last
        # in every rep: each configuration runs first once per rotation
        jobs = runner.plan(["A", "B", "C"], ["latency"], 4)
        self.assertEqual([j.config for j in jobs],
                         ["A", "B", "C", "B", "C", "A", "C", "A", "B", "A", "B", "C"])
        self.assertEqual([j.rep for j in jobs], [r for r in (1, 2, 3, 4) for _ in "ABC"])

    def test_every_configuration_runs_first_and_last_once_per_rotation(self):
        cfgs = ["A", "B", "C", "anchor"]
        jobs = runner.plan(cfgs, ["latency"], len(cfgs))
        firsts = [jobs[i].config for i in range(0, len(jobs), len(cfgs))]
        lasts = [jobs[i + len(cfgs) - 1].config for i in range(0, len(jobs), len(cfgs))]
        self.assertEqual(sorted(firsts), sorted(cfgs))
        self.assertEqual(sorted(lasts), sorted(cfgs))

    def test_every_rep_covers_every_bench_before_the_next(self):
        jobs = runner.plan(["A", "B"], ["latency", "bw"], 2)
        self.assertEqual([(j.rep, j.bench, j.config) for j in jobs], [
            (1, "latency", "A"), (1, "latency", "B"), (1, "bw", "A"), (1, "bw", "B"),
            (2, "latency", "B"), (2, "latency", "A"), (2, "bw", "B"), (2, "bw", "A")])

    def test_rotation_is_over_the_configurations_a_bench_runs_on(self):
        # R takes part in rma only: latency rotates over A and B alone
        jobs = runner.plan(["A", "B", "R"], ["latency", "put_lat"], 2,
                           families={"A": runner.FAMILIES, "B": runner.FAMILIES, "R": ("rma",)})
        self.assertEqual([(j.rep, j.bench, j.config) for j in jobs], [
            (1, "latency", "A"), (1, "latency", "B"),
            (1, "put_lat", "A"), (1, "put_lat", "B"), (1, "put_lat", "R"),
            (2, "latency", "B"), (2, "latency", "A"),
            (2, "put_lat", "B"), (2, "put_lat", "R"), (2, "put_lat", "A")])

    def test_family_restriction(self):
        jobs = runner.plan(["A", "R"], ["latency", "put_lat"], 1,
                           families={"A": runner.FAMILIES, "R": ("rma",)})
        self.assertEqual([(j.bench, j.config) for j in jobs],
                         [("latency", "A"), ("put_lat", "A"), ("put_lat", "R")])


FAKE_INI = r"""
[providers]
rxm = tcp;ofi_rxm

[good]
command = sh -c "printf '# bench=%s unit=us\n1 2.5\n8 3.5\n' {bench}"

[broken]
command = sh -c "echo '-----'; echo '[host:1] fake transport exploded: no such device' >&2; echo second line >&2; exit 3"

[garbage]
command = echo hello world

[slow]
command = sleep 30
"""


class EndToEndTest(unittest.TestCase):
    """The runner with fake configurations: failures stay in the table."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        ini = os.path.join(cls.tmp.name, "fake.ini")
        with open(ini, "w") as f:
            f.write(FAKE_INI)
        cls.out = os.path.join(cls.tmp.name, "out")
        cls.stdout = io.StringIO()
        cls.rc = runner.main(["--config-file", ini, "--benches", "latency,fop_lat", "--reps", "2",
                              "--timeout", "1", "--out", cls.out, "--no-plots",
                              "--title", "on one node"],
                             stdout=cls.stdout)
        with open(os.path.join(cls.out, "summary.md")) as f:
            cls.md = f.read()
        with open(os.path.join(cls.out, "runs.csv")) as f:
            cls.runs = list(csv.DictReader(f))
        with open(os.path.join(cls.out, "results.csv")) as f:
            cls.rows = list(csv.DictReader(f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_code_says_which_configurations_never_succeeded(self):
        # (the tables are still written: the failures are columns)
        self.assertEqual(self.rc, 1)
        out = self.stdout.getvalue()
        for config in ("broken", "garbage", "slow"):
            self.assertIn(f"runner: no run of latency on {config} succeeded", out)
        self.assertNotIn("on good succeeded", out)

    def test_title_heads_the_summary_and_the_printed_tables(self):
        self.assertTrue(self.md.startswith("# on one node ("))
        self.assertIn("## on one node", self.stdout.getvalue())

    def test_failing_config_shows_its_first_error_line(self):
        self.assertIn("failed: fake transport exploded: no such device", self.md)

    def test_failing_config_is_a_column_not_dropped(self):
        self.assertIn("| size | good | broken | garbage | slow |", self.md)
        self.assertRegex(self.md, r"\| 1 \| 2\.50 \(2\.50-2\.50\) \| failed \| failed \| failed \|")

    def test_unparsable_and_timeout(self):
        self.assertIn("failed: unparsable output: no '# bench=' header: hello world", self.md)
        self.assertIn("failed: timeout after 1 s", self.md)

    def test_timed_out_bench_is_not_rerun(self):
        slow = [r for r in self.runs if r["config"] == "slow" and r["bench"] == "latency"]
        self.assertEqual(len(slow), 2)
        self.assertIn("later reps skipped", slow[1]["error"])

    def test_runs_are_interleaved_and_rotated(self):
        order = [(r["rep"], r["bench"], r["config"]) for r in self.runs]
        cfgs = ["good", "broken", "garbage", "slow"]
        want = [(str(rep), b, c) for rep in (1, 2) for b in ("latency", "fop_lat")
                for c in cfgs[rep - 1:] + cfgs[:rep - 1]]
        self.assertEqual(order, want)

    def test_summary_says_the_order_rotates(self):
        self.assertIn("interleaved, order rotated by one configuration each rep", self.md)
        self.assertIn("order rotated by one configuration each rep", self.stdout.getvalue())

    def test_csv_has_all_raw_rows(self):
        good = [r for r in self.rows if r["config"] == "good"]
        # 2 benches x 2 reps x 2 sizes
        self.assertEqual(len(good), 8)
        self.assertEqual(set(self.rows[0].keys()) >= {"config", "bench", "size", "rep", "value"},
                         True)
        self.assertEqual({r["config"] for r in self.rows}, {"good"})

    def test_progress_is_printed(self):
        text = self.stdout.getvalue()
        self.assertRegex(text, r"\[  1/16 0:00:0\d\] rep 1/2 latency good")
        self.assertIn("FAILED fake transport exploded", text)


class AllSucceededTest(unittest.TestCase):
    """Every configuration measured: the runner's exit status is 0."""

    def test_exit_code_zero(self):
        with tempfile.TemporaryDirectory() as tmp:
            ini = os.path.join(tmp, "fake.ini")
            with open(ini, "w") as f:
                f.write(FAKE_INI)
            out = io.StringIO()
            rc = runner.main(["--config-file", ini, "--configs", "good", "--benches", "latency",
                              "--reps", "1", "--out", os.path.join(tmp, "out"), "--no-plots"],
                             stdout=out)
            self.assertEqual(rc, 0, out.getvalue())
            self.assertNotIn("runner: no run of", out.getvalue())


if __name__ == "__main__":
    unittest.main()
