// SPDX-License-Identifier: BSD-3-Clause
// "mock": ranks as threads of this process (mlcomm's threads backend), with
// 1, 2 and 4 ranks, plus the tests that need no ranks at all.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using MLFramework.Communication;
using MLFramework.Communication.Backends;
using MLFramework.Communication.Optimizations;
using MLFramework.Distributed.Communication;
using NUnit.Framework;

namespace MLFramework.Tests.Mock
{
    [TestFixture]
    public class MockCommunicatorTests
    {
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void AllReduce(int n) { Threads.Run(n, Checks.AllReduce); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void AllGather(int n) { Threads.Run(n, Checks.AllGather); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void ReduceScatter(int n) { Threads.Run(n, Checks.ReduceScatter); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void Broadcast(int n) { Threads.Run(n, Checks.Broadcast); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void ManyInFlight(int n) { Threads.Run(n, Checks.ManyInFlight); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void Errors(int n) { Threads.Run(n, Checks.Errors); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void ProcessGroup(int n) { Threads.Run(n, Checks.ProcessGroup); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void Backend(int n) { Threads.Run(n, Checks.Backend); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void TensorParallelMlp(int n) { Threads.Run(n, Checks.TensorParallelMlp); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void Exchange(int n) { Threads.Run(n, Checks.Exchange); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void AlgorithmSelection(int n) { Threads.Run(n, Checks.AlgorithmSelection); }
        [TestCase(1)] [TestCase(2)] [TestCase(4)] public void Profiler(int n) { Threads.Run(n, Checks.Profiler); }

        [Test]
        public void MockCommunicatorClassAndCreateAll()
        {
            // the specification's constructor: one thread per rank
            var made = new MockCommunicator[3];
            var ts = Enumerable.Range(0, 3).Select(r => Task.Factory.StartNew(() => made[r] = new MockCommunicator(3, r), TaskCreationOptions.LongRunning)).ToArray();
            Assert.IsTrue(Task.WaitAll(ts, TimeSpan.FromSeconds(60)));
            var sums = made.Select(c => c.AllReduceAsync(Tensor.From(new[] { c.Rank + 1 }))).ToArray();
            CollectionAssert.AreEqual(new[] { 6, 6, 6 }, sums.Select(t => t.Result.ToArray<int>()[0]).ToArray());
            Assert.AreEqual("threads", made[0].BackendName);
            foreach (var c in made) c.Dispose();
            // every rank at once
            var all = CommunicatorFactory.CreateAll(4);
            var gathers = all.Select(c => c.AllGatherAsync(Tensor.From(new[] { (long)c.Rank }))).ToArray();
            foreach (var g in gathers) CollectionAssert.AreEqual(new long[] { 0, 1, 2, 3 }, g.Result.ToArray<long>());
            foreach (var c in all) c.Dispose();
            Assert.AreEqual(0, ManagedStorage.LivePins);
        }

        [Test]
        public void AbortFailsPendingOperations()
        {
            var all = CommunicatorFactory.CreateAll(2, new Dictionary<string, object> { { "timeout", 30 } });
            // only rank 0 calls: its all-reduce waits for rank 1 until aborted
            var pending = all[0].AllReduceAsync(Tensor.From(new[] { 1.0 }));
            Assert.IsFalse(pending.Wait(200));
            ((CommunicatorBackend)all[0]).Abort();
            var e = Assert.Throws<CommunicationException>(() => pending.GetAwaiter().GetResult());
            Assert.AreEqual(-7, e.Status, e.Message);
            foreach (var c in all) c.Dispose();
            Assert.AreEqual(0, ManagedStorage.LivePins, "the aborted operation's pins were released");
        }

        [Test]
        public void FactoryConfigErrors()
        {
            Assert.Throws<ArgumentException>(() => CommunicatorFactory.Create("mock", new Dictionary<string, object> { { "world_size", 2 }, { "rank", 2 } }));
            Assert.Throws<ArgumentException>(() => CommunicatorFactory.Create("mock", new Dictionary<string, object> { { "world_size", "two" } }));
            Assert.Throws<ArgumentOutOfRangeException>(() => CommunicatorFactory.CreateAll(-3));
            Assert.Throws<ArgumentOutOfRangeException>(() => CommunicatorFactory.CreateAll(0));
            var e = Assert.Throws<CommunicationException>(() => CommunicatorFactory.Create("mock", new Dictionary<string, object> { { "no_such_key", 1 } }));
            StringAssert.Contains("no_such_key", e.Message);
            using (var c = CommunicatorFactory.Create())
            {
                Assert.AreEqual(1, c.WorldSize);
                Assert.AreEqual(0, c.Rank);
            }
        }
    }

    [TestFixture]
    public class TensorTests
    {
        [Test]
        public void FromShapeDtypeToArray()
        {
            var t = Tensor.From(new[] { 1f, 2f, 3f, 4f, 5f, 6f }, 2, 3);
            Assert.AreEqual(new TensorShape(2, 3), t.Shape);
            Assert.AreEqual(6, t.Shape.TotalSize);
            Assert.AreEqual(DType.Float32, t.DType);
            Assert.AreEqual(DeviceType.CPU, t.Device);
            CollectionAssert.AreEqual(new[] { 1f, 2f, 3f, 4f, 5f, 6f }, t.ToArray<float>());
            Assert.AreEqual(DType.Float64, Tensor.From(new[] { 1.0 }).DType);
            Assert.AreEqual(DType.Int32, Tensor.From(new[] { 1 }).DType);
            Assert.AreEqual(DType.Int64, Tensor.From(new[] { 1L }).DType);
            Assert.AreEqual(DType.BFloat16, Tensor.From(new ushort[] { 0x3F80 }, DType.BFloat16).DType);
            Assert.AreEqual(DType.Float16, Tensor.From(new ushort[] { 0x3C00 }, DType.Float16).DType);
            Assert.Throws<ArgumentException>(() => Tensor.From(new[] { 'a' }));
            Assert.Throws<ArgumentException>(() => new TensorShape(-1));
        }

        [Test]
        public unsafe void NativeMemoryTensor()
        {
            var mem = System.Runtime.InteropServices.Marshal.AllocHGlobal(4 * sizeof(int));
            try
            {
                var p = (int*)mem;
                for (int i = 0; i < 4; i++) p[i] = i * i;
                var t = new Tensor(mem, DType.Int32, new long[] { 2, 2 });
                CollectionAssert.AreEqual(new[] { 0, 1, 4, 9 }, t.ToArray<int>());
                using (var c = CommunicatorFactory.Create("mock"))
                {
                    var sum = c.AllReduceAsync(t).Result;
                    CollectionAssert.AreEqual(new[] { 0, 1, 4, 9 }, sum.ToArray<int>(), "a native host tensor's result is a managed tensor");
                    var inPlace = ((CommunicatorBackend)c).AllReduceAsync(t, t, ReduceOperation.Sum).Result;
                    Assert.AreSame(t, inPlace);
                }
                var dev = new Tensor(new IntPtr(0x1000), DType.Float32, new long[] { 4 }, DeviceType.CUDA, 0);
                Assert.AreEqual(DeviceType.CUDA, dev.Device);
                Assert.Throws<NotSupportedException>(() => dev.NewLike(4));
                Assert.Throws<InvalidOperationException>(() => dev.ToArray<float>());
            }
            finally { System.Runtime.InteropServices.Marshal.FreeHGlobal(mem); }
        }
    }

    [TestFixture]
    public class BackendFactoryTests
    {
        [Test]
        public void FactoriesReportAvailabilityWithTheReason()
        {
            var factories = new ICommunicationBackendFactory[] { new MPIBackendFactory(), new RCCLBackendFactory(), new NCCLBackendFactory() };
            CollectionAssert.AreEqual(new[] { 50, 90, 100 }, factories.Select(f => f.Priority).ToArray());
            var rccl = new RCCLBackendFactory();
            Assert.AreEqual(BackendAvailability.WhyUnavailable("rccl") == null, rccl.IsAvailable());
            if (!rccl.IsAvailable())
            {
                StringAssert.Contains("rccl", rccl.UnavailableReason.ToLowerInvariant());
                var e = Assert.Throws<CommunicationException>(() => rccl.Create(new CommunicationConfig()));
                StringAssert.Contains("RCCL is not available", e.Message);
            }
            var nccl = new NCCLBackendFactory();
            if (!nccl.IsAvailable())
                Assert.Throws<CommunicationException>(() => nccl.Create(new CommunicationConfig()));
            Assert.IsNull(BackendAvailability.WhyUnavailable("shm"));
            StringAssert.Contains("unknown backend", BackendAvailability.WhyUnavailable("nosuch"));
        }

        [Test]
        public void ConfigsApplyTheirEnvironment()
        {
            var saved = new[] { "MLC_MPI_CUDA_AWARE", "MLC_MPI_THREAD_LEVEL", "MLC_STAGE_CHUNK", "MLC_PROFILE", "NCCL_ALGO", "NCCL_DEBUG", "NCCL_BUFFSIZE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS" }
                .ToDictionary(k => k, Environment.GetEnvironmentVariable);
            try
            {
                // Communicators make their calls on threads of their own: MPI must allow that by default.
                new MPIConfig().Apply();
                Assert.AreEqual("3", Environment.GetEnvironmentVariable("MLC_MPI_THREAD_LEVEL"), "default thread level: multiple");
                new MPIConfig { UseCudaAwareMPI = false, ThreadLevel = 2, BufferSize = 1 << 20, EnableProfiling = true }.Apply();
                Assert.AreEqual("0", Environment.GetEnvironmentVariable("MLC_MPI_CUDA_AWARE"));
                Assert.AreEqual("2", Environment.GetEnvironmentVariable("MLC_MPI_THREAD_LEVEL"));
                Assert.AreEqual("1048576", Environment.GetEnvironmentVariable("MLC_STAGE_CHUNK"));
                Assert.AreEqual("stats", Environment.GetEnvironmentVariable("MLC_PROFILE"));
                Assert.Throws<ArgumentException>(() => new MPIConfig { ThreadLevel = 4 }.Apply());
                new RCCLConfig { UseTreeAllReduce = true, NumChannels = 4, EnableDebug = true }.Apply();
                Assert.AreEqual("Ring,Tree", Environment.GetEnvironmentVariable("NCCL_ALGO"));
                Assert.AreEqual("INFO", Environment.GetEnvironmentVariable("NCCL_DEBUG"));
                Assert.AreEqual("4", Environment.GetEnvironmentVariable("NCCL_MAX_NCHANNELS"));
                Assert.Throws<ArgumentException>(() => new RCCLConfig { UseRingAllReduce = false }.Apply());
                var o = new CommunicationConfig { TimeoutSeconds = 5, EnableProfiling = true, EnableLogging = true };
                o.Options["log_level"] = "warn";
                using (var b = new MlcommBackend("threads", o))
                {
                    Assert.AreEqual(1, b.WorldSize);
                    Assert.AreEqual("threads", b.BackendName);
                    b.Barrier();
                    Assert.AreEqual(1, new CommunicationProfiler(b.Communicator).GetStatistics().TotalOperations, "profiling on: the library counted the barrier");
                }
            }
            finally { foreach (var kv in saved) Environment.SetEnvironmentVariable(kv.Key, kv.Value); }
        }
    }

    [TestFixture]
    public class OptimizationTests
    {
        [Test]
        public void PinnedMemoryManagerPinsCachesAndEvicts()
        {
            using (var m = new PinnedMemoryManager(1 << 20))
            {
                Assert.AreEqual(1 << 20, m.MaxPinnedBytes);
                var t = Tensor.From(new float[1000]);
                using (var h = m.PinMemory(t))
                {
                    Assert.AreEqual(4000, h.Size);
                    Assert.AreNotEqual(IntPtr.Zero, h.Pointer);
                    Assert.GreaterOrEqual(m.TotalPinnedBytes, 4000);
                    Assert.AreEqual(1, ManagedStorage.LivePins, "the array stays fixed while pinned");
                }
                Assert.AreEqual(0, ManagedStorage.LivePins);
                Assert.AreEqual(0, m.BytesInUse);
                var a = m.Allocate(600 << 10);
                var e = Assert.Throws<CommunicationException>(() => m.Allocate(600 << 10));
                Assert.AreEqual(-2, e.Status, e.Message);
                StringAssert.Contains("limit", e.Message);
                a.Dispose();
                Assert.Greater(m.BytesCached, 0, "a freed block is cached for reuse");
                using (m.Allocate(600 << 10)) Assert.AreEqual(1, m.CacheHits);
                using (m.Allocate(900 << 10)) Assert.GreaterOrEqual(m.Evictions, 1, "the cached block was evicted to make room");
                Assert.AreEqual(0, m.LiveHandles);
                StringAssert.IsMatch("cuda|hip|mlock", m.Mode);
            }
            Assert.Throws<ArgumentException>(() => new PinnedMemoryManager(0));
        }

        [Test]
        public void SharedHostStorageAllocatesAndFrees()
        {
            var s = new SharedHostStorage(1000);
            Assert.AreEqual(1000, s.ByteLength);
            IntPtr p = s.Acquire();
            Assert.AreNotEqual(IntPtr.Zero, p);
            Assert.AreEqual(0, System.Runtime.InteropServices.Marshal.ReadByte(p, 999), "a new block is zeroed");
            using (var like = (SharedHostStorage)s.AllocateLike(64)) Assert.AreEqual(64, like.ByteLength);
            s.Dispose();
            s.Dispose(); // a second Dispose does nothing
            Assert.Throws<ObjectDisposedException>(() => s.Acquire());
            Assert.Throws<ArgumentException>(() => new SharedHostStorage(-1));
            Threads.Run(2, Checks.SharedStorageAllReduce); // threads: the blocks are plain memory
        }

        [Test]
        public void GPUDirectDetection()
        {
            foreach (var cap in new[] { GPUDirectManager.Rdma, GPUDirectManager.PeerAccess, GPUDirectManager.Ipc, GPUDirectManager.CudaAwareMpi })
                Assert.IsFalse(string.IsNullOrEmpty(cap.Evidence), "every capability says why: " + cap);
            Assert.AreEqual(GPUDirectManager.Rdma.Supported == true, GPUDirectManager.IsSupported);
            if (!GPUDirectManager.IsSupported)
            {
                using (var c = CommunicatorFactory.Create("mock"))
                using (var b = new MlcommBackend(c))
                {
                    var e = Assert.Throws<CommunicationException>(() => GPUDirectManager.EnableGPUDirect(b));
                    StringAssert.Contains(GPUDirectManager.Rdma.Evidence, e.Message);
                }
            }
        }
    }
}

namespace MLFramework.Tests.Mock
{
    [TestFixture]
    public class GroupAndStoreTests
    {
        [TestCase(1)] [TestCase(2)] [TestCase(3)] public void GroupBlockingRing(int n) { Threads.Run(n, GroupChecks.BlockingRing); }
        [TestCase(2)] [TestCase(3)] public void GroupRequestRing(int n) { Threads.Run(n, GroupChecks.RequestRing); }
        [TestCase(2)] public void GroupMisuse(int n) { Threads.Run(n, GroupChecks.Misuse); }
        [TestCase(1)] [TestCase(2)] public void MemoryIsHost(int n) { Threads.Run(n, GroupChecks.MemoryIsHost); }

        [TestCase(1)] [TestCase(2)] [TestCase(3)]
        public void FromStoreOfThreads(int n)
        {
            var store = new MemoryStore();
            var errors = new Exception[n];
            var ts = Enumerable.Range(0, n).Select(r => new System.Threading.Thread(() =>
            {
                try { GroupChecks.FromStore(store, n, r, "threads"); }
                catch (Exception e) { errors[r] = e; }
            })).ToList();
            ts.ForEach(t => t.Start());
            foreach (var t in ts) Assert.IsTrue(t.Join(TimeSpan.FromSeconds(120)), "a rank thread did not finish");
            for (int r = 0; r < n; r++) if (errors[r] != null) throw new Exception("rank " + r + ": " + errors[r].Message, errors[r]);
            // A store that served a communicator is refused (mlcomm's rule), with mlcomm's message.
            var e2 = Assert.Throws<CommunicationException>(() => CommunicatorFactory.FromStore(store, 1, 0, timeoutSeconds: 5));
            Assert.AreEqual("MLC_ERR_INVALID_ARG", e2.StatusName, e2.Message);
            Assert.AreEqual(0, ManagedStorage.LivePins);
        }

        [Test]
        public void FromStoreWhoseSetThrows()
        {
            var e = Assert.Throws<CommunicationException>(() => CommunicatorFactory.FromStore(new BrokenStore(), 1, 0, timeoutSeconds: 5));
            Assert.AreEqual("MLC_ERR_BACKEND", e.StatusName, e.Message);
            StringAssert.Contains("BrokenStore.Set(\"mlc/", e.Message);
            StringAssert.Contains("disk full writing mlc/", e.Message);
            Assert.IsInstanceOf<System.IO.IOException>(e.InnerException);
            Assert.Throws<ArgumentNullException>(() => CommunicatorFactory.FromStore(null, 1, 0));
        }
    }
}
