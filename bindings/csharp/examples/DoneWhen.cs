// SPDX-License-Identifier: BSD-3-Clause
// The communicator interface end to end, using only the specification's
// names: CommunicatorFactory.Create, then AllReduceAsync, AllGatherAsync(t, 0),
// ReduceScatterAsync, BroadcastAsync and BarrierAsync, 16 operations in
// flight at once, every result checked exactly. Launch with
//   mlcomm-run -n 4 mono DoneWhen.exe [backend]        (backend: shm by default)
// Exit 0 when every rank's every result is exact.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using MLFramework;
using MLFramework.Distributed.Communication;

public static class DoneWhen
{
    public static int Main(string[] args)
    {
        string backend = args.Length > 0 ? args[0] : "shm";
        using (ICommunicator comm = CommunicatorFactory.Create(backend, new Dictionary<string, object> { { "timeout", 60 } }))
        {
            int p = comm.WorldSize, r = comm.Rank;
            const int n = 1000;
            int bad = 0;
            Action<bool, string> check = (ok, what) => { if (!ok) { bad++; Console.Error.WriteLine("rank " + r + ": WRONG " + what); } };

            var pending = new List<Task>();
            var sums = new List<Task<Tensor>>();
            var gathers = new List<Task<Tensor>>();
            var scatters = new List<Task<Tensor>>();
            var bcasts = new List<Task<Tensor>>();
            // 16 operations in flight: 4 all-reduces, 4 all-gathers, 4 reduce-scatters, 3 broadcasts, 1 barrier.
            for (int k = 0; k < 4; k++)
            {
                float[] x = Enumerable.Range(0, n).Select(i => (float)(r + 1) * (i + k)).ToArray();
                sums.Add(comm.AllReduceAsync(Tensor.From(x, 10, n / 10)));
                long[] g = Enumerable.Range(0, 6).Select(i => (long)(1000 * r + 10 * k + i)).ToArray();
                gathers.Add(comm.AllGatherAsync(Tensor.From(g, 2, 3), 0));
                double[] s = Enumerable.Range(0, 4 * p).Select(i => (double)(i + r + k)).ToArray();
                scatters.Add(comm.ReduceScatterAsync(Tensor.From(s, 4 * p)));
                if (k < 3)
                {
                    int root = k % p;
                    int[] b = Enumerable.Range(0, 7).Select(i => r == root ? 100 * k + i : -1).ToArray();
                    bcasts.Add(comm.BroadcastAsync(Tensor.From(b), root));
                }
            }
            pending.Add(comm.BarrierAsync());
            pending.AddRange(sums); pending.AddRange(gathers); pending.AddRange(scatters); pending.AddRange(bcasts);
            if (pending.Count != 16) throw new Exception("expected 16 operations in flight, have " + pending.Count);
            Task.WaitAll(pending.ToArray(), TimeSpan.FromSeconds(120));

            double tri = p * (p + 1) / 2.0;
            for (int k = 0; k < 4; k++)
            {
                float[] got = sums[k].Result.ToArray<float>();
                check(sums[k].Result.Shape.Equals(new TensorShape(10, n / 10)), "all-reduce shape");
                for (int i = 0; i < n; i++) check(got[i] == (float)(tri * (i + k)), "all-reduce[" + k + "][" + i + "] = " + got[i]);
                long[] ga = gathers[k].Result.ToArray<long>();
                check(gathers[k].Result.Shape.Equals(new TensorShape(2 * p, 3)), "all-gather shape " + gathers[k].Result.Shape);
                for (int q = 0; q < p; q++)
                    for (int i = 0; i < 6; i++) check(ga[6 * q + i] == 1000 * q + 10 * k + i, "all-gather[" + k + "]");
                double[] sc = scatters[k].Result.ToArray<double>();
                check(sc.Length == 4, "reduce-scatter length " + sc.Length);
                for (int i = 0; i < 4; i++)
                {
                    int gi = 4 * r + i;
                    double want = p * (double)(gi + k) + (p - 1) * p / 2.0;
                    check(sc[i] == want, "reduce-scatter[" + k + "][" + i + "] = " + sc[i] + ", want " + want);
                }
                if (k < 3)
                {
                    int[] bb = bcasts[k].Result.ToArray<int>();
                    for (int i = 0; i < 7; i++) check(bb[i] == 100 * k + i, "broadcast[" + k + "][" + i + "] = " + bb[i]);
                }
            }
            Console.WriteLine("rank " + r + "/" + p + " on " + backend + ": 16 operations in flight, " + (bad == 0 ? "all results exact" : bad + " WRONG"));
            return bad == 0 ? 0 : 1;
        }
    }
}
