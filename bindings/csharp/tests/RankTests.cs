// SPDX-License-Identifier: BSD-3-Clause
// Run under a launcher (mlcomm-run for shm, mpirun for mpi): every rank runs
// these fixtures in the same (alphabetical) order on one world communicator.
using System;
using MLFramework.Communication;
using MLFramework.Communication.Backends;
using NUnit.Framework;

namespace MLFramework.Tests.Ranks
{
    [TestFixture]
    public class A_CommunicatorTests
    {
        [Test] public void AllGather() { Checks.AllGather(World.Comm); }
        [Test] public void AllReduce() { Checks.AllReduce(World.Comm); }
        [Test] public void Broadcast() { Checks.Broadcast(World.Comm); }
        [Test] public void ManyInFlight() { Checks.ManyInFlight(World.Comm); }
        [Test] public void ReduceScatter() { Checks.ReduceScatter(World.Comm); }
        [Test] public void SharedStorageAllReduce() { Checks.SharedStorageAllReduce(World.Comm); }
        [TearDown] public void NoPinsLeft() { Assert.AreEqual(0, ManagedStorage.LivePins); }
    }

    [TestFixture]
    public class B_SubgroupAndErrorTests
    {
        [Test] public void Errors() { Checks.Errors(World.Comm); }
        [Test] public void ProcessGroup() { Checks.ProcessGroup(World.Comm); }
        [TearDown] public void NoPinsLeft() { Assert.AreEqual(0, ManagedStorage.LivePins); }
    }

    [TestFixture]
    public class C_BackendTests
    {
        [Test] public void Backend() { Checks.Backend(World.Comm); }

        [Test]
        public void MPIBackendOnMpi()
        {
            if (World.Backend != "mpi") { Assert.Ignore("MPIBackend runs under mpirun (csharp.mpi.N)"); return; }
            var f = new MPIBackendFactory();
            Assert.IsTrue(f.IsAvailable(), f.UnavailableReason);
            Assert.AreEqual(50, f.Priority);
            using (var b = (MPIBackend)f.Create(new CommunicationConfig { TimeoutSeconds = 60 }))
            {
                Assert.AreEqual("MPI", b.BackendName);
                Assert.AreEqual(World.Comm.Rank, b.Rank);
                var s = b.AllReduce(Tensor.From(new[] { 1.0, b.Rank }), ReduceOp.Sum);
                CollectionAssert.AreEqual(new[] { (double)b.WorldSize, b.WorldSize * (b.WorldSize - 1) / 2.0 }, s.Data);
                Checks.Backend(b.Communicator);
            }
        }
        [TearDown] public void NoPinsLeft() { Assert.AreEqual(0, ManagedStorage.LivePins); }
    }

    [TestFixture]
    public class D_ParallelTests
    {
        [Test] public void Exchange() { Checks.Exchange(World.Comm); }
        [Test] public void TensorParallelMlp() { Checks.TensorParallelMlp(World.Comm); }
        [TearDown] public void NoPinsLeft() { Assert.AreEqual(0, ManagedStorage.LivePins); }
    }

    [TestFixture]
    public class E_OptimizationTests
    {
        [Test] public void AlgorithmSelection() { Checks.AlgorithmSelection(World.Comm); }
        [Test] public void Profiler() { Checks.Profiler(World.Comm); }
    }

    [TestFixture]
    public class F_GroupAndStoreTests
    {
        [Test] public void GroupBlockingRing() { GroupChecks.BlockingRing(World.Comm); }
        [Test] public void GroupRequestRing() { GroupChecks.RequestRing(World.Comm); }
        [Test] public void GroupMisuse() { GroupChecks.Misuse(World.Comm); }
        [Test] public void MemoryIsHost() { GroupChecks.MemoryIsHost(World.Comm); }

        /// <summary>The ranks (processes) meet through a folder of files that rank 0 names.</summary>
        [Test]
        public void FromStoreOfProcesses()
        {
            var c = World.Comm;
            var id = Tensor.From(c.Rank == 0 ? Guid.NewGuid().ToByteArray() : new byte[16]);
            c.BroadcastAsync(id, 0).Wait();
            string dir = System.IO.Path.Combine(System.IO.Path.GetTempPath(), "mlcomm-cs-store-" + new Guid(id.Data).ToString("N"));
            try { GroupChecks.FromStore(new FolderStore(dir), c.WorldSize, c.Rank, World.Backend); }
            finally
            {
                c.BarrierAsync().Wait();
                if (c.Rank == 0) System.IO.Directory.Delete(dir, true);
            }
        }
        [TearDown] public void NoPinsLeft() { Assert.AreEqual(0, ManagedStorage.LivePins); }
    }

    /// <summary>
    /// The job's last fixture (fixtures run in name order): every rank frees
    /// the world communicator, so the process exits with none of mlcomm's
    /// threads or shared memory left. (A [SetUpFixture] here would do it too,
    /// but NUnit 2.6's -run=namespace then selects no test at all.)
    /// </summary>
    [TestFixture]
    public class Z_JobEnd
    {
        [Test] public void FreeWorld() { World.Free(); }
    }
}
