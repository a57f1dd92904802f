// SPDX-License-Identifier: BSD-3-Clause
// The checks every rank runs, on a launched job (Ranks fixtures) and on
// ranks as threads (Mock fixtures). Every expected value is computed
// locally and compared exactly.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using MLFramework.Communication;
using MLFramework.Communication.Backends;
using MLFramework.Communication.Exchange;
using MLFramework.Communication.Optimizations;
using MLFramework.Distributed.Communication;
using NUnit.Framework;

namespace MLFramework.Tests
{
    public static class Checks
    {
        static T R<T>(Task<T> t) { return t.GetAwaiter().GetResult(); }

        static long Part(long n, int p, int r, out long offset)
        {
            long b = n / p, extra = n % p;
            offset = r * b + Math.Min(r, extra);
            return b + (r < extra ? 1 : 0);
        }

        /// <summary>An all-reduce of tensors in shared host memory (read in place by peers on shm).</summary>
        public static void SharedStorageAllReduce(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            const int n = 100003; // past the engine's 8 KiB slots
            var mine = Enumerable.Range(0, n).Select(i => (float)((r + 1) * (i % 7))).ToArray();
            using (var storage = new SharedHostStorage(4L * n))
            {
                var t = new Tensor(storage, DType.Float32, n);
                System.Runtime.InteropServices.Marshal.Copy(mine, 0, storage.Acquire(), n);
                var sum = R(c.AllReduceAsync(t, ReduceOperation.Sum));
                Assert.IsInstanceOf<SharedHostStorage>(sum.Storage, "a result over shared storage is shared storage");
                var got = sum.ToArray<float>();
                float ranks = p * (p + 1) / 2;
                for (int i = 0; i < n; i++)
                    if (got[i] != ranks * (i % 7)) Assert.Fail("shared all-reduce [" + i + "]: " + got[i] + ", expected " + ranks * (i % 7));
                ((IDisposable)sum.Storage).Dispose();
            }
        }

        public static void AllReduce(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            const int n = 37;
            foreach (ReduceOperation op in Enum.GetValues(typeof(ReduceOperation)))
            {
                // value of rank q at i: (q % 3 + 1) * (i % 5 + 1), small enough for exact products
                Func<int, int, long> v = (q, i) => (q % 3 + 1) * (i % 5 + 1);
                Func<int, long> want = i =>
                {
                    var vals = Enumerable.Range(0, p).Select(q => v(q, i)).ToList();
                    switch (op)
                    {
                        case ReduceOperation.Sum: return vals.Sum();
                        case ReduceOperation.Max: return vals.Max();
                        case ReduceOperation.Min: return vals.Min();
                        case ReduceOperation.Product: return vals.Aggregate(1L, (a, b) => a * b);
                        default: return vals.Sum() / p;
                    }
                };
                var ti = R(c.AllReduceAsync(Tensor.From(Enumerable.Range(0, n).Select(i => (int)v(r, i)).ToArray()), op)).ToArray<int>();
                var tl = R(c.AllReduceAsync(Tensor.From(Enumerable.Range(0, n).Select(i => v(r, i)).ToArray(), n), op)).ToArray<long>();
                var tf = R(c.AllReduceAsync(Tensor.From(Enumerable.Range(0, n).Select(i => (float)v(r, i)).ToArray()), op)).ToArray<float>();
                var td = R(c.AllReduceAsync(Tensor.From(Enumerable.Range(0, n).Select(i => (double)v(r, i)).ToArray()), op)).ToArray<double>();
                for (int i = 0; i < n; i++)
                {
                    Assert.AreEqual(want(i), ti[i], op + " int32 [" + i + "]");
                    Assert.AreEqual(want(i), tl[i], op + " int64 [" + i + "]");
                    double wf = op == ReduceOperation.Avg ? Enumerable.Range(0, p).Sum(q => (double)v(q, i)) / p : want(i);
                    Assert.AreEqual((float)wf, tf[i], op + " float32 [" + i + "]");
                    Assert.AreEqual(wf, td[i], op + " float64 [" + i + "]");
                }
            }
            // 16-bit floats as raw patterns: 1.0 (0x3C00 half, 0x3F80 bfloat16) summed p times
            ushort[] halfSum = R(c.AllReduceAsync(Tensor.From(new ushort[] { 0x3C00, 0x3C00 }, DType.Float16))).ToArray<ushort>();
            ushort[] bfSum = R(c.AllReduceAsync(Tensor.From(new ushort[] { 0x3F80 }, DType.BFloat16))).ToArray<ushort>();
            ushort[] halfOf = { 0, 0x3C00, 0x4000, 0x4200, 0x4400 };
            ushort[] bfOf = { 0, 0x3F80, 0x4000, 0x4040, 0x4080 };
            Assert.AreEqual(halfOf[p], halfSum[0], "float16 sum");
            Assert.AreEqual(bfOf[p], bfSum[0], "bfloat16 sum");
        }

        public static void AllGather(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            Func<int, int, int, int> v = (q, i, j) => 100 * q + 10 * i + j;
            var shard = Tensor.From(Enumerable.Range(0, 6).Select(k => v(r, k / 3, k % 3)).ToArray(), 2, 3);
            var g0 = R(c.AllGatherAsync(shard, 0));
            Assert.AreEqual(new TensorShape(2 * p, 3), g0.Shape);
            var a0 = g0.ToArray<int>();
            for (int q = 0; q < p; q++) for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++)
                Assert.AreEqual(v(q, i, j), a0[(2 * q + i) * 3 + j], "dim 0");
            foreach (int dim in new[] { 1, -1 })
            {
                var g1 = R(c.AllGatherAsync(shard, dim));
                Assert.AreEqual(new TensorShape(2, 3 * p), g1.Shape, "dim " + dim);
                var a1 = g1.ToArray<int>();
                for (int q = 0; q < p; q++) for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++)
                    Assert.AreEqual(v(q, i, j), a1[i * 3 * p + 3 * q + j], "dim " + dim);
            }
            // uneven shards along dim 1 into a given output (rank q has q+1 columns)
            var cb = c as CommunicatorBackend;
            var mine = Tensor.From(Enumerable.Range(0, 2 * (r + 1)).Select(k => (double)(1000 * r + k)).ToArray(), 2, r + 1);
            long total = p * (p + 1) / 2;
            var outT = Tensor<double>.Zeros(2, total);
            R(cb.AllGatherAsync(mine, outT, 1));
            var o = outT.Data;
            for (int i = 0; i < 2; i++)
            {
                int col = 0;
                for (int q = 0; q < p; q++)
                    for (int j = 0; j <= q; j++, col++)
                        Assert.AreEqual(1000 * q + i * (q + 1) + j, o[i * total + col], "uneven all-gather");
            }
        }

        public static void ReduceScatter(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            long n = 2 * p + 1; // uneven: mlcomm's split, larger parts first
            var t = Tensor.From(Enumerable.Range(0, (int)n * 2).Select(k => (long)(k + r)).ToArray(), n, 2);
            var got = R(c.ReduceScatterAsync(t));
            long off;
            long len = Part(n, p, r, out off);
            Assert.AreEqual(new TensorShape(len, 2), got.Shape);
            var a = got.ToArray<long>();
            for (long i = 0; i < len * 2; i++)
                Assert.AreEqual(p * (off * 2 + i) + p * (p - 1) / 2, a[i], "reduce-scatter [" + i + "]");
            var mx = R(c.ReduceScatterAsync(t, ReduceOperation.Max)).ToArray<long>();
            for (long i = 0; i < len * 2; i++) Assert.AreEqual(off * 2 + i + p - 1, mx[i], "reduce-scatter max");
        }

        public static void Broadcast(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            for (int root = 0; root < p; root++)
            {
                var t = Tensor.From(Enumerable.Range(0, 5).Select(i => r == root ? root * 10.0 + i : -1.0).ToArray());
                var got = R(c.BroadcastAsync(t, root));
                Assert.AreSame(t, got, "broadcast is in place");
                CollectionAssert.AreEqual(Enumerable.Range(0, 5).Select(i => root * 10.0 + i).ToArray(), got.ToArray<double>());
            }
            R(c.BarrierAsync().ContinueWith(x => { x.GetAwaiter().GetResult(); return true; }));
        }

        /// <summary>Many operations in flight, submitted one after another from different threads, completed by the pump.</summary>
        public static void ManyInFlight(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            var tasks = new List<Task<Tensor>>();
            for (int k = 0; k < 32; k++)
            {
                int kk = k;
                // each submission from a thread of its own, in order (the next starts after this one returned)
                var submitted = Task.Factory.StartNew(() => c.AllReduceAsync(Tensor.From(new[] { (float)(r + kk), 1f, (float)kk })),
                                                      TaskCreationOptions.LongRunning).Result;
                tasks.Add(submitted);
            }
            var barrier = c.BarrierAsync();
            Assert.IsTrue(Task.WaitAll(tasks.Cast<Task>().Concat(new[] { barrier }).ToArray(), TimeSpan.FromSeconds(120)), "operations did not complete");
            for (int k = 0; k < 32; k++)
                CollectionAssert.AreEqual(new[] { (float)(p * k + p * (p - 1) / 2), (float)p, (float)(p * k) }, tasks[k].Result.ToArray<float>(), "op " + k);
            Assert.AreEqual(0, ((CommunicatorBackend)c).PendingOperations);
        }

        public static void Errors(ICommunicator world)
        {
            int p = world.WorldSize, r = world.Rank;
            var c = R(((CommunicatorBackend)world).SplitAsync(0, r));
            try
            {
                // a dimension out of range: every rank fails, with mlcomm's message
                var e1 = Assert.Throws<CommunicationException>(() => R(c.AllGatherAsync(Tensor.From(new[] { 1, 2 }), 3)));
                StringAssert.Contains("dim", e1.Message);
                Assert.AreEqual(-1, e1.Status, "MLC_ERR_INVALID_ARG: " + e1.Message);
                Assert.AreEqual("MLC_ERR_INVALID_ARG", e1.StatusName);
                // a root out of range
                var e2 = Assert.Throws<CommunicationException>(() => R(c.BroadcastAsync(Tensor.From(new[] { 1.0 }), p)));
                StringAssert.Contains("root", e2.Message.ToLowerInvariant());
                if (p > 1)
                {
                    // shapes that differ between ranks: a mismatch on every rank, naming the ranks
                    var e3 = Assert.Throws<CommunicationException>(() => R(c.AllReduceAsync(Tensor.From(new float[r + 1]))));
                    Assert.AreEqual(-10, e3.Status, e3.Message);
                    StringAssert.Contains("rank", e3.Message);
                }
            }
            finally { c.Dispose(); }
            Assert.Throws<ObjectDisposedException>(() => c.BarrierAsync());
            // bad input found by the binding itself
            Assert.Throws<ArgumentException>(() => Tensor.From(new float[6], 4, 2));
            Assert.Throws<ArgumentException>(() => Tensor.From(new ushort[2], DType.Float32));
            Assert.Throws<ArgumentException>(() => Tensor.From(new float[2]).ToArray<double>());
            var e4 = Assert.Throws<CommunicationException>(() => CommunicatorFactory.Create("nosuch"));
            StringAssert.Contains("nosuch", e4.Message);
            Assert.AreEqual(-9, e4.Status);
            // the world communicator is still healthy
            CollectionAssert.AreEqual(new[] { p }, R(world.AllReduceAsync(Tensor.From(new[] { 1 }))).ToArray<int>());
        }

        public static void ProcessGroup(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            var evens = Enumerable.Range(0, p).Where(q => q % 2 == 0).ToList();
            using (var g = new ProcessGroup(c, evens, r))
            {
                Assert.AreEqual(evens.Count, g.WorldSize);
                if (r % 2 == 0)
                {
                    Assert.IsTrue(g.IsMember);
                    Assert.AreEqual(r / 2, g.LocalRank);
                    var sum = R(g.AllReduceAsync(Tensor.From(new[] { (long)r }), ReduceOperation.Sum)).ToArray<long>();
                    Assert.AreEqual(evens.Sum(), sum[0], "only members contribute");
                    var gathered = R(g.AllGatherAsync(Tensor.From(new[] { r }))).ToArray<int>();
                    CollectionAssert.AreEqual(evens.ToArray(), gathered);
                    R(g.BroadcastAsync(Tensor.From(new[] { r }), 0));
                    g.BarrierAsync().Wait();
                }
                else
                {
                    Assert.IsFalse(g.IsMember);
                    Assert.AreEqual(-1, g.LocalRank);
                    Assert.Throws<InvalidOperationException>(() => g.AllReduceAsync(Tensor.From(new[] { 1 })));
                }
            }
            Assert.Throws<ArgumentException>(() => new ProcessGroup(c, new List<int> { 0, 0 }, r));
            Assert.Throws<ArgumentException>(() => new ProcessGroup(c, new List<int> { p }, r));
            Assert.Throws<ArgumentException>(() => new ProcessGroup(c, new List<int> { 0 }, r + 1)); // not this rank
        }

        /// <summary>The backend interfaces: blocking forms, handles, Send/Receive (with and without a template), Probe.</summary>
        public static void Backend(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            using (var b = new MlcommBackend(c))
            {
                Assert.AreEqual(r, b.Rank);
                Assert.AreEqual(p, b.WorldSize);
                var x = Tensor.From(new[] { (double)r, 1.0 });
                CollectionAssert.AreEqual(new[] { p * (p - 1) / 2.0, p }, b.AllReduce(x, ReduceOp.Sum).Data);
                var red = b.Reduce(Tensor.From(new[] { r + 1 }), ReduceOp.Product, p - 1);
                if (r == p - 1) Assert.AreEqual(Enumerable.Range(1, p).Aggregate(1, (a, q) => a * q), red.Data[0]);
                CollectionAssert.AreEqual(Enumerable.Range(0, p).ToArray(), b.AllGather(Tensor.From(new[] { r })).Data);
                var rs = b.ReduceScatter(Tensor.From(Enumerable.Range(0, p).Select(i => (float)i).ToArray()), ReduceOp.Sum);
                CollectionAssert.AreEqual(new[] { (float)(p * r) }, rs.Data);
                var bc = Tensor.From(new[] { r == 0 ? 42L : 0L });
                b.Broadcast(bc, 0);
                Assert.AreEqual(42L, bc.Data[0]);
                b.Barrier();

                var h1 = b.AllReduceAsync(Tensor.From(new[] { 2 }), ReduceOp.Max);
                var h2 = b.BroadcastAsync(Tensor.From(new[] { r }), p - 1);
                var h3 = b.ReduceAsync(Tensor.From(new[] { 1.5f }), ReduceOp.Sum, 0);
                var h4 = b.AllGatherAsync(Tensor.From(new[] { (byte)r }));
                var h5 = b.ReduceScatterAsync(Tensor.From(new long[p]), ReduceOp.Min);
                var h6 = b.BarrierAsync();
                Assert.IsTrue(h6.TryWait(TimeSpan.FromSeconds(60)));
                Assert.AreEqual(2, h1.GetResult().ToArray<int>()[0]);
                Assert.AreEqual(p - 1, h2.GetResult().ToArray<int>()[0]);
                if (r == 0) Assert.AreEqual(1.5f * p, h3.GetResult().ToArray<float>()[0]);
                CollectionAssert.AreEqual(Enumerable.Range(0, p).Select(q => (byte)q).ToArray(), h4.GetResult().ToArray<byte>());
                Assert.AreEqual(1, h5.GetResult().NumElements);
                Assert.IsTrue(h1.IsCompleted && h6.IsCompleted);

                // ring: send to the next rank, receive from the previous one
                int next = (r + 1) % p, prev = (r + p - 1) % p;
                var s = b.SendAsync(Tensor.From(Enumerable.Range(0, 3 + r).Select(i => (float)(10 * r + i)).ToArray()), next, 7);
                var info = b.WaitProbe(prev, 7);
                Assert.AreEqual(prev, info.SourceRank);
                Assert.AreEqual(7, info.Tag);
                Assert.AreEqual(3 + prev, info.Count<float>());
                Assert.IsTrue(b.Probe(prev, 7).HasValue, "a probed message stays until received");
                var got = b.Receive<float>(prev, 7);
                CollectionAssert.AreEqual(Enumerable.Range(0, 3 + prev).Select(i => (float)(10 * prev + i)).ToArray(), got.Data);
                s.Wait();
                b.Barrier();
                Assert.IsFalse(b.Probe(prev, 7).HasValue, "nothing left to probe");

                // with a template, blocking send on one side of each pair, async on the other
                var template = Tensor<int>.Zeros(2, 2);
                var recv = b.ReceiveAsync(prev, template, 3);
                b.SendAsync(Tensor.From(new[] { r, r, r, r }, 2, 2), next, 3).Wait();
                var rt = (Tensor<int>)recv.GetResult();
                Assert.AreEqual(new TensorShape(2, 2), rt.Shape);
                CollectionAssert.AreEqual(new[] { prev, prev, prev, prev }, rt.Data);
                var any = b.ReceiveAsync<long>(prev, 4);
                b.Send(Tensor.From(new[] { 5L, 6L }), next, 4);
                CollectionAssert.AreEqual(new[] { 5L, 6L }, any.GetResult().ToArray<long>());

                // a longer message than the template: MLC_ERR_TRUNCATE with both sizes
                var small = b.ReceiveAsync(prev, Tensor<int>.Zeros(1), 5);
                b.Send(Tensor.From(new[] { 1, 2, 3 }), next, 5);
                var e = Assert.Throws<CommunicationException>(() => small.Wait());
                Assert.AreEqual(-8, e.Status, e.Message);
                b.Barrier();
            }
            CollectionAssert.AreEqual(new[] { p }, R(c.AllReduceAsync(Tensor.From(new[] { 1 }))).ToArray<int>(), "the communicator outlives a backend over it");
        }

        static double[] MatMul(double[] a, double[] b, int n, int k, int m)
        {
            var c = new double[n * m];
            for (int i = 0; i < n; i++) for (int j = 0; j < m; j++)
            {
                double s = 0;
                for (int l = 0; l < k; l++) s += a[i * k + l] * b[l * m + j];
                c[i * m + j] = s;
            }
            return c;
        }

        /// <summary>
        /// A tensor-parallel MLP (column-parallel W1, row-parallel W2) matches
        /// its serial result: Y = relu(X W1) W2. Integer-valued doubles keep
        /// every sum exact, so the comparison is exact.
        /// </summary>
        public static void TensorParallelMlp(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            const int B = 3, H = 4, F = 10; // F split unevenly across ranks
            double[] X = Enumerable.Range(0, B * H).Select(i => (double)(i % 7 - 3)).ToArray();
            double[] W1 = Enumerable.Range(0, H * F).Select(i => (double)(i % 5 - 2)).ToArray();
            double[] W2 = Enumerable.Range(0, F * H).Select(i => (double)(i % 3 - 1)).ToArray();
            double[] hidden = MatMul(X, W1, B, H, F).Select(v => Math.Max(0, v)).ToArray();
            double[] serial = MatMul(hidden, W2, B, F, H);

            long off;
            int f = (int)Part(F, p, r, out off);
            double[] W1r = new double[H * f], W2r = new double[f * H];
            for (int i = 0; i < H; i++) for (int j = 0; j < f; j++) W1r[i * f + j] = W1[i * F + off + j];
            for (int i = 0; i < f; i++) for (int j = 0; j < H; j++) W2r[i * H + j] = W2[(off + i) * H + j];
            double[] hr = MatMul(X, W1r, B, H, f).Select(v => Math.Max(0, v)).ToArray();
            double[] partial = MatMul(hr, W2r, B, f, H);
            var y = R(c.AllReduceAsync(Tensor.From(partial, B, H))).ToArray<double>();
            CollectionAssert.AreEqual(serial, y, "tensor-parallel output differs from the serial one");
            // the activations gathered along the feature dimension are the serial ones
            var full = Tensor<double>.Zeros(B, F);
            R(((CommunicatorBackend)c).AllGatherAsync(Tensor.From(hr, B, f), full, -1));
            CollectionAssert.AreEqual(hidden, full.Data);
            // and the gradient's reduce-scatter along dim 1 gives each rank its columns
            var gs = R(((CommunicatorBackend)c).ReduceScatterAsync(Tensor.From(hidden, B, F), ReduceOperation.Sum, 1)).ToArray<double>();
            for (int i = 0; i < B; i++) for (int j = 0; j < f; j++) Assert.AreEqual(p * hidden[i * F + off + j], gs[i * f + j]);
        }

        /// <summary>A periodic 1-D halo exchange: each rank owns 8 cells, with one ghost cell on each side.</summary>
        public static void Exchange(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank;
            const int n = 8;
            var domain = new Box(new long[] { 0 }, new long[] { n * p });
            var parent = new Box(new long[] { n * r - 1 }, new long[] { n + 2 });
            var valid = new Box(new long[] { n * r }, new long[] { n });
            var data = new double[n + 2];
            using (var ex = new ExchangePlan(c, 1, DType.Float64, domain, new[] { true }))
            {
                ex.Provide(data, parent, valid);
                ex.Need(data, parent, new Box(new long[] { n * r - 1 }, new long[] { 1 }));
                ex.Need(data, parent, new Box(new long[] { n * r + n }, new long[] { 1 }));
                ex.Build();
                for (int step = 0; step < 3; step++)
                {
                    for (int i = 0; i < n; i++) data[1 + i] = 1000 * step + n * r + i;
                    if (step == 1) { ex.Start(); Assert.IsTrue(ex.InFlight); ex.Finish(); } // split phase
                    else ex.Run();
                    long left = ((long)n * r - 1 + n * p) % (n * p), right = ((long)n * r + n) % (n * p);
                    Assert.AreEqual(1000 * step + left, data[0], "left ghost, step " + step);
                    Assert.AreEqual(1000 * step + right, data[n + 1], "right ghost, step " + step);
                }
                ex.Build(); // unchanged layout: the cached plan
                var info = ex.Info();
                Assert.AreEqual(1, info.Builds);
                Assert.AreEqual(1, info.CacheHits);
                Assert.AreEqual(3, info.Runs);
                Assert.IsFalse(string.IsNullOrEmpty(info.Executor));
                // overlapping provides are refused with both boxes named
                ex.Clear();
                ex.Provide(data, parent, valid);
                ex.Provide(data, parent, valid);
                var e = Assert.Throws<CommunicationException>(() => ex.Build());
                StringAssert.Contains("overlap", e.Message);
            }
            // native buffers, and SetData pointing the views at another buffer (double buffering)
            IntPtr m1 = System.Runtime.InteropServices.Marshal.AllocHGlobal((n + 2) * sizeof(double));
            IntPtr m2 = System.Runtime.InteropServices.Marshal.AllocHGlobal((n + 2) * sizeof(double));
            try
            {
                using (var ex = new ExchangePlan(c, 1, DType.Float64, domain, new[] { true }))
                {
                    int pid = ex.Provide(m1, parent, valid);
                    int left = ex.Need(m1, parent, new Box(new long[] { n * r - 1 }, new long[] { 1 }));
                    ex.Build();
                    foreach (var m in new[] { m1, m2 })
                    {
                        double offset = m == m1 ? 0 : 5000;
                        var vals = Enumerable.Range(0, n + 2).Select(i => offset + i - 1.0 + n * r).ToArray();
                        vals[0] = -1; // the ghost, until the exchange fills it
                        System.Runtime.InteropServices.Marshal.Copy(vals, 0, m, n + 2);
                        ex.SetData(ExchangeSide.Provide, pid, m);
                        ex.SetData(ExchangeSide.Need, left, m);
                        ex.Run();
                        var got = new double[1];
                        System.Runtime.InteropServices.Marshal.Copy(m, got, 0, 1);
                        double want = ((long)n * r - 1 + n * p) % (n * p);
                        Assert.AreEqual(offset + want, got[0], "native left ghost");
                    }
                }
            }
            finally
            {
                System.Runtime.InteropServices.Marshal.FreeHGlobal(m1);
                System.Runtime.InteropServices.Marshal.FreeHGlobal(m2);
            }
        }

        public static void AlgorithmSelection(ICommunicator c)
        {
            int p = c.WorldSize;
            var sel = new AlgorithmSelector(c);
            foreach (long bytes in new long[] { 8, 64 << 10, 16 << 20 })
            {
                string name = sel.AlgorithmName(2, bytes);
                Assert.IsFalse(string.IsNullOrEmpty(name));
                Assert.AreEqual(AlgorithmSelector.Parse(name), sel.SelectAllReduceAlgorithm(bytes));
                sel.SelectAllGatherAlgorithm(bytes);
                sel.SelectReduceScatterAlgorithm(bytes);
            }
            // the mpi backend runs MPI's own algorithms: forcing one is for the engine's backends
            if (c is MockCommunicator || World.Backend != "mpi")
            {
                sel.ForceAllReduceAlgorithm(CommunicationAlgorithm.Ring);
                Assert.AreEqual(CommunicationAlgorithm.Ring, sel.SelectAllReduceAlgorithm(1 << 20));
                var sum = R(c.AllReduceAsync(Tensor.From(Enumerable.Range(0, 1000).Select(i => (float)i).ToArray()))).ToArray<float>();
                Assert.AreEqual(999f * p, sum[999]);
                sel.ForceAllReduceAlgorithm(CommunicationAlgorithm.Automatic);
            }
            var e = Assert.Throws<CommunicationException>(() => sel.Force(2, CommunicationAlgorithm.Dissemination));
            StringAssert.Contains("dissemination", e.Message);
            Assert.AreEqual("RecursiveDoubling", AlgorithmSelector.GetAlgorithmName(CommunicationAlgorithm.RecursiveDoubling));
        }

        public static void Profiler(ICommunicator c)
        {
            using (var prof = new CommunicationProfiler(c))
            {
                var t = Tensor.From(new float[1024]);
                var y = R(prof.ProfileAsync("AllReduceAsync", t.ByteSize, () => c.AllReduceAsync(t), c.WorldSize, "auto"));
                Assert.AreEqual(1024, y.NumElements);
                Assert.AreEqual(1, prof.Profiles.Count);
                Assert.AreEqual(4096, prof.Profiles[0].DataSizeBytes);
                Assert.IsTrue(prof.Profiles[0].Duration > TimeSpan.Zero);
                var lib = prof.LibraryProfiles();
                var ar = lib.FirstOrDefault(x => x.Operation == "allreduce");
                Assert.IsNotNull(ar, "the library's statistics have all-reduces (profile=stats)");
                Assert.IsTrue(ar.Count >= 1);
                var st = prof.GetStatistics();
                Assert.AreEqual(1 + lib.Sum(x => x.Count), st.TotalOperations);
                Assert.IsTrue(st.MaxBandwidth >= st.MinBandwidth);
                StringAssert.Contains("Total Operations", st.ToString());
                var plain = new CommunicationProfiler(false);
                Assert.AreEqual(5, plain.Profile("x", 1, () => 5));
                Assert.AreEqual(0, plain.GetStatistics().TotalOperations);
            }
        }
    }
}
