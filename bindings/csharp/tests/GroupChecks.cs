// SPDX-License-Identifier: BSD-3-Clause
// Groups, bootstrap through a caller's store, and the memory kind: checks
// every rank runs (ranks as threads and as processes).
using System;
using System.Linq;
using MLFramework.Communication;
using MLFramework.Communication.Backends;
using MLFramework.Distributed.Communication;
using NUnit.Framework;

namespace MLFramework.Tests
{
    public static class GroupChecks
    {
        /// <summary>8 MiB: far above any eager limit, so a blocking send waits for its receive.</summary>
        const int Elements = 8 << 20 >> 3;

        static Tensor<double> Payload(int rank)
        {
            return Tensor.From(Enumerable.Range(0, Elements).Select(i => rank * 1e7 + i).ToArray());
        }

        static void CheckFrom(int rank, Tensor<double> got)
        {
            var want = Payload(rank).Data;
            Assert.AreEqual(want.Length, got.Data.Length);
            for (int i = 0; i < want.Length; i += 4093) Assert.AreEqual(want[i], got.Data[i], "element " + i);
            Assert.AreEqual(want[want.Length - 1], got.Data[want.Length - 1]);
        }

        /// <summary>Each rank sends to its right and receives from its left, blocking forms inside a group.</summary>
        public static void BlockingRing(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank, right = (r + 1) % p, left = (r + p - 1) % p;
            using (var b = new MlcommBackend(c))
            {
                var send = Payload(r);
                Tensor<double> got;
                using (Group.Start())
                {
                    b.Send(send, right, 7);                                  // returns at once
                    got = b.Receive(left, Tensor<double>.Zeros(Elements), 7); // filled by the group's end
                }
                CheckFrom(left, got);
            }
        }

        /// <summary>The handle forms in a group; waiting for one before the end fails as in C.</summary>
        public static void RequestRing(ICommunicator c)
        {
            int p = c.WorldSize, r = c.Rank, right = (r + 1) % p, left = (r + p - 1) % p;
            using (var b = new MlcommBackend(c))
            {
                ICommunicationHandle sent, received;
                using (Group.Start())
                {
                    sent = b.SendAsync(Payload(r), right, 3);
                    received = b.ReceiveAsync(left, Tensor<double>.Zeros(Elements), 3);
                    var e = Assert.Throws<CommunicationException>(() => received.Wait());
                    Assert.AreEqual("MLC_ERR_INVALID_ARG", e.StatusName, e.Message);
                    Assert.IsFalse(received.IsCompleted);
                }
                sent.Wait();
                CheckFrom(left, (Tensor<double>)received.GetResult());
            }
        }

        /// <summary>Nesting counts; an end without a start and tensor-layer calls in a group are refused.</summary>
        public static void Misuse(ICommunicator c)
        {
            var e = Assert.Throws<CommunicationException>(() => Group.End());
            Assert.AreEqual("MLC_ERR_INVALID_ARG", e.StatusName, e.Message);
            Assert.IsFalse(Group.IsOpen);
            int p = c.WorldSize, r = c.Rank;
            using (var b = new MlcommBackend(c))
            {
                Tensor<int> got;
                using (Group.Start())
                {
                    Assert.Throws<InvalidOperationException>(() => c.AllReduceAsync(Tensor.From(new[] { 1 })));
                    Assert.Throws<InvalidOperationException>(() => b.Receive<int>((r + p - 1) % p));
                    using (Group.Start()) b.Send(Tensor.From(new[] { r }), (r + 1) % p, 5);
                    Assert.IsTrue(Group.IsOpen, "an inner end only counts");
                    got = b.Receive((r + p - 1) % p, Tensor<int>.Zeros(1), 5);
                }
                Assert.IsFalse(Group.IsOpen);
                Assert.AreEqual((r + p - 1) % p, got.Data[0]);
                // An invalid operation fails the group's end with mlcomm's error.
                e = Assert.Throws<CommunicationException>(() =>
                {
                    using (Group.Start()) b.Send(Tensor.From(new[] { r }), p, 5);
                });
                Assert.AreEqual("MLC_ERR_INVALID_ARG", e.StatusName, e.Message);
                // ... and the end still waits for the group's other operations before it throws.
                const int n = 1 << 20;
                var mine = Tensor<double>.Zeros(n);
                for (int i = 0; i < n; i++) mine.Data[i] = r * 1000.0 + i % 7;
                Tensor<double> got2 = null;
                e = Assert.Throws<CommunicationException>(() =>
                {
                    using (Group.Start())
                    {
                        b.Send(Tensor.From(new[] { r }), p, 6);
                        b.Send(mine, (r + 1) % p, 7);
                        got2 = b.Receive((r + p - 1) % p, Tensor<double>.Zeros(n), 7);
                    }
                });
                Assert.AreEqual("MLC_ERR_INVALID_ARG", e.StatusName, e.Message);
                int left = (r + p - 1) % p;
                for (int i = 0; i < n; i += 4099)
                    Assert.AreEqual(left * 1000.0 + i % 7, got2.Data[i], "element " + i + " after the failed end");
            }
        }

        public static void MemoryIsHost(ICommunicator c)
        {
            var cb = (CommunicatorBackend)c;
            Assert.AreEqual(MemoryKind.Host, cb.Memory);
            Assert.AreEqual(-1, cb.Device);
        }

        /// <summary>A communicator made through store (its ranks call this at once): it works.</summary>
        public static void FromStore(IKeyValueStore store, int p, int r, string backend)
        {
            using (var c = CommunicatorFactory.FromStore(store, p, r, timeoutSeconds: 60))
            {
                Assert.AreEqual(p, c.WorldSize);
                Assert.AreEqual(r, c.Rank);
                Assert.AreEqual(backend, ((CommunicatorBackend)c).BackendName);
                MemoryIsHost(c);
                var sum = c.AllReduceAsync(Tensor.From(new[] { r + 1L })).Result;
                Assert.AreEqual(p * (p + 1L) / 2, sum.ToArray<long>()[0]);
            }
        }
    }
}
