// SPDX-License-Identifier: BSD-3-Clause
// Test support: the world communicator of a launched job (mlcomm-run,
// mpirun), and ranks as threads of this process ("mock").
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using MLFramework.Distributed.Communication;
using NUnit.Framework;

namespace MLFramework.Tests
{
    public static class World
    {
        private static ICommunicator _comm;
        /// <summary>The backend under test: MLC_BACKEND (shm under mlcomm-run, mpi under mpirun).</summary>
        public static string Backend { get { return Environment.GetEnvironmentVariable("MLC_BACKEND") ?? "shm"; } }
        /// <summary>This process's rank of the job; profiling on (the profiler tests read its statistics).</summary>
        public static ICommunicator Comm
        {
            get
            {
                if (_comm == null)
                    _comm = CommunicatorFactory.Create(Backend, new Dictionary<string, object> { { "timeout", 60 }, { "profile", "stats" } });
                return _comm;
            }
        }
        /// <summary>
        /// Free the world communicator (the job's last step): the process then
        /// exits with none of mlcomm's threads or shared memory left behind.
        /// </summary>
        public static void Free()
        {
            if (_comm == null) return;
            _comm.Dispose();
            _comm = null;
        }
    }

    public static class Threads
    {
        /// <summary>Run body on every rank of an n-rank "mock" communicator (ranks are threads); rethrows the first failure.</summary>
        public static void Run(int n, Action<ICommunicator> body)
        {
            string group = Guid.NewGuid().ToString();
            var errors = new Exception[n];
            var threads = Enumerable.Range(0, n).Select(r => new Thread(() =>
            {
                try
                {
                    using (var c = CommunicatorFactory.Create("mock", new Dictionary<string, object> {
                        { "world_size", n }, { "rank", r }, { "group", group }, { "timeout", 60 }, { "profile", "stats" } }))
                    {
                        Assert.AreEqual(r, c.Rank);
                        Assert.AreEqual(n, c.WorldSize);
                        body(c);
                    }
                }
                catch (Exception e) { errors[r] = e; }
            })).ToList();
            threads.ForEach(t => t.Start());
            foreach (var t in threads)
                if (!t.Join(TimeSpan.FromSeconds(180))) Assert.Fail("a rank thread did not finish within 180 s");
            for (int r = 0; r < n; r++)
                if (errors[r] != null) throw new Exception("rank " + r + " of " + n + ": " + errors[r].Message, errors[r]);
            Assert.AreEqual(0, ManagedStorage.LivePins, "pinned GCHandles left after every operation completed");
        }
    }
}
