// SPDX-License-Identifier: BSD-3-Clause
// The completion pump: one thread per communicator makes every call on it
// (mlcomm's rule: a communicator is used by one thread at a time), in the
// order operations were submitted from any thread, and completes each
// operation's Task when its mlcomm request completes (mlc_request_test /
// mlc_tensor_request_test). Nothing blocks a caller's thread; no Task.Run.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using MLFramework.Communication.Native;

namespace MLFramework.Communication
{
    /// <summary>An mlcomm error: the status and mlcomm's message from the thread that failed.</summary>
    public class CommunicationException : Exception
    {
        /// <summary>The mlc_status_t value (negative), or 0 for errors found by the binding.</summary>
        public int Status { get; private set; }
        /// <summary>The status's enumerator name ("MLC_ERR_TIMEOUT").</summary>
        public string StatusName { get; private set; }
        public CommunicationException(string message) : base(message) { StatusName = ""; }
        public CommunicationException(string message, Exception inner) : base(message, inner) { StatusName = ""; }
        public CommunicationException(int status, string message)
            : this(status, message, null) { }
        /// <summary>An mlcomm error caused by `inner` (e.g. a store callback that threw).</summary>
        public CommunicationException(int status, string message, Exception inner)
            : base(Format(status, message), inner)
        {
            Status = status;
            StatusName = Mlc.StatusName(status) ?? "";
        }
        private static string Format(int status, string message)
        {
            string name = Mlc.StatusName(status) ?? ("status " + status);
            return string.IsNullOrEmpty(message) ? name + ": " + Mlc.Str(Mlc.mlc_status_string(status)) : name + ": " + message;
        }
        internal static void Check(int st)
        {
            if (st != Mlc.Success) throw new CommunicationException(st, Mlc.LastError());
        }
    }

    /// <summary>One operation: started and tested on the pump thread.</summary>
    internal abstract class PumpOp
    {
        internal enum Kind { Request, TensorRequest, Immediate, Polling }
        internal IntPtr Req;
        internal Kind ReqKind;
        /// <summary>Kind.Polling: called on every pump pass until it posts a request (sets Req and ReqKind) or fails.</summary>
        internal Func<IntPtr, PumpOp, int> Poll;
        internal System.Diagnostics.Stopwatch Since;
        internal string PollWhat;
        /// <summary>Start the operation (pump thread); returns an mlc status, sets Req/ReqKind.</summary>
        internal abstract int Start(IntPtr comm);
        /// <summary>Called once with the final status and, on error, mlcomm's message.</summary>
        internal abstract void Finish(int status, string message);
        internal abstract void Cancel(Exception e);
    }

    /// <summary>A PumpOp whose Task yields T.</summary>
    internal sealed class PumpOp<T> : PumpOp
    {
        private readonly Func<IntPtr, PumpOp, int> _start;
        private readonly Func<T> _result;
        private readonly Action _cleanup;
        internal readonly TaskCompletionSource<T> Tcs =
            new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        private int _finished;

        internal PumpOp(Func<IntPtr, PumpOp, int> start, Func<T> result, Action cleanup)
        {
            _start = start; _result = result; _cleanup = cleanup;
        }
        internal override int Start(IntPtr comm) { return _start(comm, this); }
        /// <summary>
        /// The value the Task will yield, before the operation completed: a
        /// blocking form called inside a group returns it at once (its buffers
        /// are filled by the group's end, as in C).
        /// </summary>
        internal T EarlyResult() { return _result != null ? _result() : default(T); }
        internal override void Finish(int status, string message)
        {
            if (Interlocked.Exchange(ref _finished, 1) != 0) return;
            Exception err = null;
            T value = default(T);
            try
            {
                if (status == Mlc.Success && _result != null) value = _result();
            }
            catch (Exception e) { err = e; }
            finally { if (_cleanup != null) _cleanup(); }
            if (status != Mlc.Success) Tcs.SetException(new CommunicationException(status, message));
            else if (err != null) Tcs.SetException(err);
            else Tcs.SetResult(value);
        }
        internal override void Cancel(Exception e)
        {
            if (Interlocked.Exchange(ref _finished, 1) != 0) return;
            try { if (_cleanup != null) _cleanup(); } finally { Tcs.SetException(e); }
        }
    }

    /// <summary>Owns an mlc_comm_t and the thread that calls it.</summary>
    internal sealed class CommEngine : IDisposable
    {
        private readonly object _gate = new object();
        private readonly Queue<PumpOp> _submitted = new Queue<PumpOp>();
        private readonly List<PumpOp> _inflight = new List<PumpOp>();
        private readonly Thread _thread;
        private IntPtr _comm;
        private bool _closing, _closed;
        internal readonly int Rank, Size;
        internal readonly string Backend;
        /// <summary>mlc_comm_memory and mlc_comm_device: fixed for the communicator's life.</summary>
        internal readonly MemoryKind Memory;
        internal readonly int Device;
        /// <summary>The communicator's timeout in seconds (0 = never): bounds the binding's own polling.</summary>
        internal readonly double TimeoutSeconds;

        internal CommEngine(IntPtr comm)
        {
            TimeoutSeconds = Mlc.mlc_comm_timeout(comm);
            _comm = comm;
            Rank = Mlc.mlc_comm_rank(comm);
            Size = Mlc.mlc_comm_size(comm);
            Backend = Mlc.Str(Mlc.mlc_comm_backend(comm));
            Memory = (MemoryKind)Mlc.mlc_comm_memory(comm);
            Device = Mlc.mlc_comm_device(comm);
            _thread = new Thread(Loop) { IsBackground = true, Name = "mlcomm pump rank " + Rank + "/" + Size };
            _thread.Start();
        }

        internal int InFlight { get { lock (_gate) return _inflight.Count + _submitted.Count; } }

        /// <summary>Queue an operation; its Task completes when mlcomm completes it.</summary>
        internal Task<T> Submit<T>(Func<IntPtr, PumpOp, int> start, Func<T> result, Action cleanup)
        {
            var op = new PumpOp<T>(start, result, cleanup);
            Enqueue(op);
            return op.Tcs.Task;
        }

        /// <summary>Queue op for the pump; false (op cancelled) once the communicator is being disposed.</summary>
        private bool Enqueue(PumpOp op)
        {
            lock (_gate)
            {
                if (_closing)
                {
                    op.Cancel(new ObjectDisposedException("communicator", "the communicator was disposed"));
                    return false;
                }
                _submitted.Enqueue(op);
                Monitor.Pulse(_gate);
            }
            return true;
        }

        /// <summary>
        /// Start ops (made by this engine's callers, in call order) between
        /// mlc_group_start and mlc_group_end on the pump thread, all as request
        /// forms, then poll their requests as any others. The Task yields
        /// mlc_group_end's outcome.
        /// </summary>
        internal Task<bool> SubmitGroup(List<PumpOp> ops)
        {
            var batch = new PumpOp<bool>((comm, self) =>
            {
                self.ReqKind = PumpOp.Kind.Immediate;
                int st = Mlc.mlc_group_start();
                if (st != Mlc.Success)
                {
                    string msg = Mlc.LastError();
                    foreach (var op in ops) op.Finish(st, msg);
                    return st;
                }
                foreach (var op in ops) StartOne(op);
                return Mlc.mlc_group_end();
            }, () => true, null);
            if (!Enqueue(batch))
                foreach (var op in ops) op.Cancel(new ObjectDisposedException("communicator", "the communicator was disposed"));
            return batch.Tcs.Task;
        }

        /// <summary>Run a call on the pump thread in order (no request), e.g. split or probe.</summary>
        internal Task<T> Call<T>(Func<IntPtr, T> call)
        {
            T value = default(T);
            return Submit<T>((c, op) => { op.ReqKind = PumpOp.Kind.Immediate; value = call(c); return Mlc.Success; },
                             () => value, null);
        }

        /// <summary>Blocking form: waits for the Task and throws its exception unwrapped.</summary>
        internal static T Wait<T>(Task<T> t)
        {
            T early;
            if (Group.TryBlocking(t, out early)) return early; // inside a group: returns at once
            return t.GetAwaiter().GetResult();
        }

        /// <summary>How long the pump keeps polling without sleeping after the last progress.</summary>
        private static readonly long SpinTicks = System.Diagnostics.Stopwatch.Frequency / 2000; // 500 us

        private void Loop()
        {
            var idle = new System.Diagnostics.Stopwatch();
            var batch = new List<PumpOp>();
            while (true)
            {
                lock (_gate)
                {
                    while (_submitted.Count == 0 && _inflight.Count == 0 && !_closing) Monitor.Wait(_gate);
                    if (_closing && _submitted.Count == 0 && _inflight.Count == 0) break;
                    while (_submitted.Count > 0) batch.Add(_submitted.Dequeue());
                }
                bool progress = batch.Count > 0;
                foreach (var op in batch) StartOne(op);
                batch.Clear();
                List<PumpOp> done = null;
                lock (_gate)
                {
                    for (int i = 0; i < _inflight.Count; i++)
                    {
                        var op = _inflight[i];
                        int flag;
                        if (op.ReqKind == PumpOp.Kind.Polling)
                        {
                            int pst;
                            try { pst = op.Poll(_comm, op); }
                            catch (Exception ex)
                            {
                                _inflight.RemoveAt(i--);
                                op.Cancel(ex);
                                continue;
                            }
                            bool late = op.ReqKind == PumpOp.Kind.Polling && TimeoutSeconds > 0 && op.Since.Elapsed.TotalSeconds > TimeoutSeconds;
                            if (pst != Mlc.Success || late)
                            {
                                string msg = pst != Mlc.Success ? Mlc.LastError()
                                    : op.PollWhat + ": nothing arrived within " + TimeoutSeconds + " s (the communicator's timeout)";
                                (done ?? (done = new List<PumpOp>())).Add(op);
                                _inflight.RemoveAt(i--);
                                op.Finish(pst != Mlc.Success ? pst : Mlc.ErrTimeout, msg);
                                continue;
                            }
                            if (op.ReqKind == PumpOp.Kind.Polling) continue;
                            progress = true;
                        }
                        int st = op.ReqKind == PumpOp.Kind.TensorRequest
                            ? Mlc.mlc_tensor_request_test(ref op.Req, out flag)
                            : Mlc.mlc_request_test(ref op.Req, out flag);
                        if (flag != 0 || st != Mlc.Success)
                        {
                            string msg = st != Mlc.Success ? Mlc.LastError() : null;
                            (done ?? (done = new List<PumpOp>())).Add(op);
                            _inflight.RemoveAt(i--);
                            op.Finish(st, msg);
                        }
                    }
                }
                if (done != null) progress = true;
                if (progress) { idle.Reset(); continue; }
                // Nothing moved: keep polling (yielding the core) for a while,
                // then wait up to 1 ms at a time (a submission wakes it at once).
                if (!idle.IsRunning) idle.Start();
                if (idle.ElapsedTicks < SpinTicks) Thread.Yield();
                else lock (_gate) { if (_submitted.Count == 0 && !_closing) Monitor.Wait(_gate, 1); }
            }
            if (_comm != IntPtr.Zero) { Mlc.mlc_comm_free(_comm); _comm = IntPtr.Zero; }
            lock (_gate) { _closed = true; Monitor.PulseAll(_gate); }
        }

        private void StartOne(PumpOp op)
        {
            int st;
            try { st = op.Start(_comm); }
            catch (Exception e) { op.Cancel(e); return; }
            if (st != Mlc.Success) { op.Finish(st, Mlc.LastError()); return; }
            if (op.ReqKind == PumpOp.Kind.Polling) op.Since = System.Diagnostics.Stopwatch.StartNew();
            else if (op.ReqKind == PumpOp.Kind.Immediate || op.Req == IntPtr.Zero) { op.Finish(Mlc.Success, null); return; }
            lock (_gate) _inflight.Add(op);
        }

        /// <summary>Fail every rank's pending and later operations (any thread).</summary>
        internal void Abort()
        {
            IntPtr c = _comm;
            if (c != IntPtr.Zero) Mlc.mlc_comm_abort(c);
        }

        /// <summary>
        /// Let queued and in-flight operations finish (each is bounded by the
        /// communicator's timeout), then free the communicator on the pump thread.
        /// </summary>
        public void Dispose()
        {
            lock (_gate)
            {
                if (_closing) { while (!_closed) Monitor.Wait(_gate); return; }
                _closing = true;
                Monitor.PulseAll(_gate);
            }
            if (Thread.CurrentThread == _thread)
                throw new InvalidOperationException("a communicator cannot be disposed from its own completion thread");
            _thread.Join();
        }
    }
}
