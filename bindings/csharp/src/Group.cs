// SPDX-License-Identifier: BSD-3-Clause
// Groups (mlc_group_start / mlc_group_end, as ncclGroupStart/End) over the
// completion pumps. mlcomm's group is per thread, but here every call on a
// communicator is made by that communicator's pump thread; so the calling
// thread's group is opened and ended in mlcomm too (mlcomm counts the
// nesting and refuses an end without a start), while the point-to-point and
// buffer operations the thread submits in it are held back, with their pins,
// until the outermost end. Then each communicator's pump starts its share
// between mlc_group_start and mlc_group_end, and the end waits for the
// operations called in blocking form, as mlc_group_end does.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using MLFramework.Communication.Native;

namespace MLFramework.Communication
{
    /// <summary>
    /// A group scope: <c>using (Group.Start()) { backend.Send(...); backend.Receive(...); }</c>.
    /// Inside it the blocking forms of Send, Receive (with a template) and
    /// Reduce return at once (their tensors are filled when the group ends and
    /// must stay untouched until then), the handle forms return handles that
    /// complete after the end, and Dispose (the outermost end) waits for the
    /// blocking forms and throws the first failure in call order.
    /// </summary>
    public sealed class Group : IDisposable
    {
        private sealed class Entry
        {
            internal CommEngine Engine;
            internal PumpOp Op;
            internal Task Task;
            internal bool Blocking;
        }

        private sealed class State
        {
            internal int Depth;
            internal readonly List<Entry> Ops = new List<Entry>();
        }

        [ThreadStatic] private static State _state;
        private bool _ended;

        private Group() { }

        /// <summary>Open a group on the calling thread (mlc_group_start); groups nest.</summary>
        public static Group Start()
        {
            NativeLoader.Ensure();
            StartNative();
            return new Group();
        }

        private static void StartNative()
        {
            CommunicationException.Check(Mlc.mlc_group_start());
            (_state ?? (_state = new State())).Depth++;
        }

        /// <summary>
        /// End the calling thread's group (mlc_group_end): an inner one only
        /// counts; the outermost one starts the group's operations and waits
        /// for those called in blocking form. Throws CommunicationException
        /// (MLC_ERR_INVALID_ARG without an open group; else the first failure
        /// of a blocking-form operation in call order).
        /// </summary>
        public static void End()
        {
            NativeLoader.Ensure();
            EndNative();
        }

        private static void EndNative()
        {
            CommunicationException.Check(Mlc.mlc_group_end());
            var s = _state;
            if (s == null || --s.Depth > 0) return;
            var ops = s.Ops.ToList();
            s.Ops.Clear();
            // One batch per communicator, in the order of their first operation.
            var batches = ops.GroupBy(o => o.Engine).Select(g => g.Key.SubmitGroup(g.Select(o => o.Op).ToList())).ToList();
            // Wait for every one before reporting the first failure: none may
            // still be writing the caller's buffers when End returns.
            var outcomes = ops.Where(o => o.Blocking).Select(o => (Task)o.Task).Concat(batches).Select(Outcome).ToList();
            var first = outcomes.FirstOrDefault(e => e != null);
            if (first != null) throw first;
        }

        /// <summary>Waits for t; its exception, or null.</summary>
        private static Exception Outcome(Task t)
        {
            try { t.GetAwaiter().GetResult(); return null; }
            catch (Exception e) { return e; }
        }

        /// <summary>Whether the calling thread has a group open.</summary>
        public static bool IsOpen { get { return _state != null && _state.Depth > 0; } }

        /// <summary>Ends the group (Group.End), once.</summary>
        public void Dispose()
        {
            if (_ended) return;
            _ended = true;
            End();
        }

        /// <summary>Hold op back until the calling thread's outermost group end.</summary>
        internal static void Add(CommEngine engine, PumpOp op, Task task)
        {
            _state.Ops.Add(new Entry { Engine = engine, Op = op, Task = task });
        }

        /// <summary>
        /// A blocking form's wait inside the group: marks the operation as one
        /// the end waits for and gives its result at once. False when task is
        /// not held by this thread's open group.
        /// </summary>
        internal static bool TryBlocking<T>(Task<T> task, out T early)
        {
            early = default(T);
            var e = Held(task);
            if (e == null) return false;
            e.Blocking = true;
            early = ((PumpOp<T>)e.Op).EarlyResult();
            return true;
        }

        /// <summary>Waiting for a handle of an operation of the open group fails, as mlc_request_wait does.</summary>
        internal static void CheckNotHeld(Task task)
        {
            if (Held(task) != null)
                throw new CommunicationException(Mlc.ErrInvalidArg,
                    "waiting for an operation of the open group: it completes after the group ends (Group.End)");
        }

        private static Entry Held(Task task)
        {
            var s = _state;
            if (s == null || s.Depth == 0) return null;
            foreach (var e in s.Ops) if (e.Task == task) return e;
            return null;
        }
    }
}
