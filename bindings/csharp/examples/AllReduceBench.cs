// SPDX-License-Identifier: BSD-3-Clause
// Time of AllReduceAsync through the binding (submission, the pump, the
// Task's completion), one operation at a time and `depth` in flight, for a
// few sizes. Launch: mlcomm-run -n 2 mono AllReduceBench.exe [iterations] [depth]
using System;
using System.Diagnostics;
using System.Linq;
using System.Threading.Tasks;
using MLFramework;
using MLFramework.Distributed.Communication;

public static class AllReduceBench
{
    public static int Main(string[] args)
    {
        int iters = args.Length > 0 ? int.Parse(args[0]) : 1000;
        int depth = args.Length > 1 ? int.Parse(args[1]) : 16;
        using (var comm = CommunicatorFactory.Create(Environment.GetEnvironmentVariable("MLC_BACKEND") ?? "shm"))
        {
            if (comm.Rank == 0) Console.WriteLine("# ranks {0}, {1} iterations; us per all-reduce (float32)", comm.WorldSize, iters);
            if (comm.Rank == 0) Console.WriteLine("{0,10} {1,14} {2,18}", "bytes", "one at a time", depth + " in flight");
            foreach (int n in new[] { 2, 256, 16384, 262144 })
            {
                var t = Tensor.From(new float[n]);
                for (int i = 0; i < 20; i++) comm.AllReduceAsync(t).Wait();
                comm.BarrierAsync().Wait();
                var sw = Stopwatch.StartNew();
                for (int i = 0; i < iters; i++) comm.AllReduceAsync(t).Wait();
                double one = sw.Elapsed.TotalMilliseconds * 1000 / iters;
                comm.BarrierAsync().Wait();
                sw.Restart();
                for (int i = 0; i < iters; i += depth)
                    Task.WaitAll(Enumerable.Range(0, depth).Select(_ => (Task)comm.AllReduceAsync(t)).ToArray());
                double many = sw.Elapsed.TotalMilliseconds * 1000 / (iters / depth * depth);
                if (comm.Rank == 0) Console.WriteLine("{0,10} {1,14:F1} {2,18:F1}", n * 4, one, many);
            }
        }
        return 0;
    }
}
